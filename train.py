"""Train a GPT: python train.py [CONFIG] [key.path=value ...]

python train.py                                  # configs/default.yaml
python train.py data.source=my.txt               # your own text, into out/my
python train.py configs/shakespeare_char_cpu.yaml train.max_iters=500
python train.py configs/gpt2_124m.yaml --prepare-only   # tokenise once, before torchrun
torchrun --standalone --nproc_per_node=4 train.py configs/gpt2_124m.yaml
python train.py --eval-only [--text FILE]        # the loss of out_dir's run, no training
python train.py --export-hf DIR                  # out_dir's run as a Hugging Face GPT-2 or GPT-Neo
"""

import argparse
import contextlib
import errno
import importlib
import os
import sys

from cli import OneLineErrorParser, interrupt_after, wrap_for

DEFAULT_CONFIG = "configs/default.yaml"  # as --help says it; configs.paths has the file


def build_parser(keys_help):
    parser = OneLineErrorParser(
        prog="train.py",
        hint=flag_hint,
        fallback="keys are set as key.path=value",
        description="Train a GPT as a YAML config says. Keys can be overridden as key.path=value.",
        epilog="config keys (type, built-in default, meaning; [the value configs/default.yaml "
        "sets, where it differs]):\n" + keys_help,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "args",
        nargs="*",
        metavar="CONFIG | key.path=value",
        help=f"a YAML file (default {DEFAULT_CONFIG}), then overrides",
    )
    parser.add_argument(
        "--print-config", action="store_true", help="print the resolved config and exit"
    )
    parser.add_argument(
        "--prepare-only",
        action="store_true",
        help="tokenise the corpus into data.cache_dir and exit (run it once before torchrun "
        "on a big corpus, so no process waits on another's preparation)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="start over in out_dir even if it holds a checkpoint (which is replaced)",
    )
    parser.add_argument(
        "--eval-only",
        action="store_true",
        help="print the loss, perplexity and bits/byte of the run in out_dir on its whole "
        "val split (or on --text FILE), without training",
    )
    parser.add_argument(
        "--text", metavar="FILE", help="with --eval-only: evaluate on this UTF-8 text file"
    )
    parser.add_argument(
        "--export-hf",
        metavar="DIR",
        help="write the run in out_dir to the new folder DIR as a Hugging Face GPT-2 "
        "(config.json, model.safetensors, tokenizer files), without training",
    )
    return parser


def flag_hint(option):
    """What to type instead of an option train.py does not have, in other tools' styles (a
    config key as a flag, nanoGPT's --max_iters=20), or None."""
    from configs.load import full_key

    name, _, value = option.lstrip("-").partition("=")
    if name == "config":
        return (
            "give the config file as the first argument, without a flag: python train.py FILE.yaml"
        )
    key = full_key(name)
    if key:
        return (
            f"did you mean {key}={value or 'VALUE'}? (keys are set as key.path=value, "
            "without dashes)"
        )
    return None


def run(args):
    from configs.load import load_config, to_yaml
    from configs.paths import DEFAULT_CONFIG as default_file
    from configs.schema import resolved

    path, overrides = default_file, list(args.args)
    if overrides and "=" not in overrides[0]:
        path = overrides.pop(0)
    config = load_config(path, overrides)
    if config.run_dir != config.out_dir:  # your own text: never the demo's folder
        data = config.data.source if not config.data.mix else "a mix"
        what = "the run folder read is" if args.eval_only or args.export_hf else "the run goes to"
        if not args.prepare_only:  # which writes no run folder
            say_note(
                f"note: data.source is {data}, so {what} out_dir={config.run_dir} (set "
                "out_dir to choose)"
            )
    if args.print_config:
        print(to_yaml(resolved(config)), end="")  # out_dir as the run's folder
        return 0
    try:
        with in_cli_words():
            return work(args, config)
    finally:  # a killed forced restart's folder that this run did not tidy: say what it is
        from runs.restart import leftover_note

        if note := leftover_note(config.run_dir):
            say_note(note)


def say_note(note):
    """A note on stderr, wrapped to the terminal as the run's own notes are (a pipe gets lines)."""
    print(wrap_for(note, sys.stderr), file=sys.stderr)


def work(args, config):
    """What the flags ask of `config`: prepare, evaluate, export or train. Each resolves the run
    folder (config.run_dir) itself, once."""
    from lab.run import train  # torch loads only when needed
    from training.eval_text import evaluate_only
    from training.start import prepare_corpus, pretrained_start
    from training.stopping import TrainingStopped

    if args.prepare_only:
        pretrained = pretrained_start(config)  # fine-tuning prepares with the source's tokenizer
        for part in prepare_corpus(config, pretrained.tokenizer if pretrained else None).parts:
            meta = part.prepared.meta
            print(
                f"prepared {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens "
                f"in {part.prepared.dir}"
            )
        return 0
    if args.eval_only:
        print(evaluate_only(config, args.text))
        return 0
    if args.export_hf:
        from configs.paths import data_caches
        from runs.export import export_hf
        from runs.folder import CONFIG_FILE

        run_dir = config.run_dir
        caches = data_caches(os.path.join(run_dir, CONFIG_FILE))
        names = export_hf(run_dir, args.export_hf, caches)
        print(f"exported {run_dir} to {args.export_hf}: {', '.join(names)}")
        return 0
    try:
        with quiet_when_reader_leaves():
            train(config, force=args.force)
    except TrainingStopped as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


FORCE = (
    "use another out_dir, or pass --force to start over in this one (its checkpoint is replaced)"
)


@contextlib.contextmanager
def in_cli_words():
    """The packages' typed errors, reworded with what to type at this script instead."""
    from model.checkpoint import NoCheckpoint
    from runs.export import ExportFolderError
    from training.resume import CannotResume

    try:
        yield
    except CannotResume as e:
        raise ValueError(f"{e.problem}; {FORCE}") from None
    except ExportFolderError as e:
        raise ValueError(
            f"cannot make {e.dest} for the export ({e.why}); give --export-hf a folder you can "
            "write to"
        ) from None
    except NoCheckpoint as e:
        raise FileNotFoundError(f"{e} (`python train.py` trains one)") from None


class _PipeSafe:
    """A stream that goes quiet when its reader leaves (`train.py | head`): the write that finds
    the pipe closed points the file descriptor at /dev/null, so training goes on and saves as
    usual, and the interpreter's last flush finds nothing to complain about."""

    def __init__(self, stream):
        self.stream = stream

    def _quiet(self):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())
        os.close(devnull)

    def write(self, text):
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._quiet()
            return len(text)

    def flush(self):
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._quiet()

    def __getattr__(self, name):  # isatty, fileno, encoding, ...
        return getattr(self.stream, name)


@contextlib.contextmanager
def quiet_when_reader_leaves():
    """stdout as _PipeSafe while training: a closed pipe never stops or loses a run."""
    if not hasattr(sys.stdout, "fileno"):
        yield
        return
    try:
        sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (a test's StringIO)
        yield
        return
    old, sys.stdout = sys.stdout, _PipeSafe(sys.stdout)
    try:
        yield
    finally:
        sys.stdout = old


def main(argv=None):
    try:
        with interrupt_after():  # Ctrl-C while torch starts: one line, after it has started
            importlib.import_module("torch")
        from configs.load import describe, load_config
        from configs.paths import DEFAULT_CONFIG as default_file

        shipped = load_config(default_file) if default_file.is_file() else None
        parser = build_parser(describe(shipped))
        args = parser.parse_intermixed_args(argv)
        if args.text and not args.eval_only:
            parser.error("--text goes with --eval-only")
        return run(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a folder that cannot be made or written, a full disk, ...
        where = f" {e.filename}" if e.filename else ""
        if e.errno == errno.ENOSPC:
            print(
                f"error: the disk is full (writing{where or ' data'}); free some space, or choose "
                "another out_dir / data.cache_dir on a disk that has it",
                file=sys.stderr,
            )
        else:
            print(
                f"error: cannot use{where}: {e.strerror or e}; check the path and its permissions, "
                "or choose another out_dir / data.cache_dir",
                file=sys.stderr,
            )
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
