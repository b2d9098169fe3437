"""The run folder's guards, around a run the loop trains: nothing is written outside out_dir or
into a data cache; rank 0 holds the folder's lock; a forced restart is written aside and
replaces the old run only at its first checkpoint (runs/restart.py); and the files beside the
checkpoint (meta.json, the tokenizer, config.yaml, metrics.jsonl) are written here."""

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from configs.load import to_yaml
from configs.paths import data_caches
from configs.schema import Config
from data.mix import Mixture
from model.device import bf16_native, fast_matmul_dtype
from runs.folder import CONFIG_FILE, META_FILE, METRICS_FILE
from runs.output_path import check_output_path
from runs.restart import Aside, clean_stale_asides, finish_cut_swap, written_aside
from storage.atomic import clean_stale_temps, write_atomic
from storage.lock import folder_lock
from training.console import Console, Metrics
from training.peak import peak_flops
from training.resume import check_language
from training.runtime import Runtime
from training.start import Start, how_it_starts, prepare_data, pretrained_start, vocab_note
from training.trackers import Trackers


@dataclass(kw_only=True)
class OpenRun:
    """A run about to be built, inside its guards: how it starts, its data, where it writes."""

    config: Config
    runtime: Runtime
    start: Start
    data: Mixture  # the prepared sources (one, or a data.mix)
    console: Console
    aside: Aside | None  # a forced restart's folder until its first checkpoint (rank 0)
    metrics: Metrics | None = None  # opened by open_run_folder (rank 0); closed on the way out

    @property
    def orth_dtype(self) -> torch.dtype:
        """The dtype of Muon's Newton–Schulz matmuls: bf16 where the device has it in hardware."""
        return fast_matmul_dtype(self.runtime.device.type, bf16_native(self.runtime.device))


@contextlib.contextmanager
def open_run(config, runtime, force, watchers=()):
    """An OpenRun, inside what guards it: the run folder's lock (rank 0 alone writes the folder,
    so it alone holds it) and, for a forced restart, the aside folder. Every input is checked
    (the watchers' too: `prepare`) before the folder is touched."""
    console = Console(runtime.is_main)
    # A run folder is an output: never in a data cache, whose files every run reads.
    check_output_path(config.out_dir, caches=[*data_caches(), config.data.cache_path])
    if runtime.is_main and (note := finish_cut_swap(config.out_dir)):  # before its lock
        console.note(note)
    lock = folder_lock(config.out_dir, "training run") if runtime.is_main else None
    with lock or contextlib.nullcontext():
        accum = config.train.grad_accum_steps
        if accum % runtime.world_size:
            raise ValueError(
                f"train.grad_accum_steps ({accum}) must be a multiple of the number of "
                f"processes ({runtime.world_size}): each process runs an equal share of the "
                "micro-batches"
            )
        check_language(config, force or config.train.resume == "never")
        pretrained = pretrained_start(config)
        data = prepare_data(config, runtime, pretrained)
        if note := vocab_note(config, data, pretrained):
            console.note(note)
        for watcher in watchers:
            watcher.prepare(config, runtime, console)  # a watcher's inputs fail before the folder
        start = how_it_starts(config, data, pretrained, force)
        del pretrained
        aside_wanted = start.aside and runtime.is_main
        with written_aside(config.out_dir) if aside_wanted else contextlib.nullcontext() as aside:
            run = OpenRun(
                config=config, runtime=runtime, start=start, data=data, console=console,
                aside=aside,
            )  # fmt: skip
            try:
                yield run
            finally:
                if run.metrics is not None:
                    run.metrics.close()  # the trackers' last records reach their files


def open_run_folder(run, progress):
    """Rank 0's part of building a run: stale temps cleaned, the run files written (into the
    aside folder for a forced restart), the metrics opened (run.metrics), and the peak FLOP/s
    found (None: unknown)."""
    config, aside, console = run.config, run.aside, run.console
    settings = config.train
    folder = aside.folder if aside else Path(config.out_dir)
    clean_stale_temps(config.out_dir)  # a killed writer's; the lock keeps live ones away
    clean_stale_asides(config.out_dir)
    if aside:
        console.say(
            f"forced restart: this run is written aside in {aside.folder} and replaces "
            f"{config.out_dir} whole at its first checkpoint; until then the old run "
            "stays as it is"
        )
    if progress.step < settings.max_iters:
        write_run_files(config, run.data, folder)
    trackers = Trackers(settings.loggers, folder, config) if settings.loggers else None
    resumed = run.start.how == "resumed"
    run.metrics = Metrics(
        folder / METRICS_FILE, trackers=trackers, resume_step=progress.step if resumed else None
    )
    peak = peak_flops(
        run.runtime.device, settings.peak_flops, config.data.cache_path, run.runtime.dtype
    )
    if peak is None:
        console.note(
            f"note: no peak FLOP/s known for {run.runtime.device}; MFU is shown as n/a until you "
            "set train.peak_flops"
        )
    return peak


def publish_aside(job, step):
    """A forced restart's first checkpoint is written: its aside folder replaces the old run."""
    kept = job.aside.publish()
    job.metrics.path = job.folder / METRICS_FILE  # Metrics appends by path
    kept = f"; kept from the old folder: {', '.join(kept)}" if kept else ""
    job.console.say(
        f"{job.out_dir}: the old run is replaced by this one at its first "
        f"checkpoint (step {step}){kept}"
    )


def write_config(job):
    """config.yaml, the config of the checkpoint just saved: written only with a checkpoint, so
    an attempt that saved nothing (a resume that diverged at once) leaves the one on disk."""
    write_atomic(job.folder / CONFIG_FILE, to_yaml(job.config))


def write_run_files(config, data, out_dir):
    """What generation needs besides the checkpoint: meta.json and the tokenizer. config.yaml
    is the checkpoint's, written with it (write_config)."""
    write_atomic(out_dir / META_FILE, json.dumps(data.meta, indent=2) + "\n")
    write_atomic(out_dir / data.meta["tokenizer_file"], data.tokenizer_path.read_bytes())
