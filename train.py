"""Train a GPT: python train.py [CONFIG] [key.path=value ...]

    python train.py                                  # configs/default.yaml
    python train.py data.source=my.txt               # your own text, into out/my
    python train.py configs/shakespeare_char_cpu.yaml train.max_iters=500
    python train.py configs/gpt2_124m.yaml --prepare-only   # tokenise once, before torchrun
    torchrun --standalone --nproc_per_node=4 train.py configs/gpt2_124m.yaml
    python train.py --eval-only [--text FILE]        # the loss of out_dir's run, no training
    python train.py --export-hf DIR                  # out_dir's run as a Hugging Face GPT-2 folder
"""

import argparse
import contextlib
import errno
import os
import sys
from pathlib import Path

DEFAULT_CONFIG = "configs/default.yaml"


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse prints usage plus the error; the house style is one `error:` line, exit 2."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


def build_parser(keys_help):
    parser = OneLineErrorParser(
        prog="train.py",
        description="Train a GPT as a YAML config says. Keys can be overridden as key.path=value.",
        epilog="config keys (type, built-in default, meaning; [the value configs/default.yaml sets, "
               "where it differs]):\n" + keys_help,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("args", nargs="*", metavar="CONFIG | key.path=value",
                        help=f"a YAML file (default {DEFAULT_CONFIG}), then overrides")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("--prepare-only", action="store_true",
                        help="tokenise the corpus into data.cache_dir and exit (run it once before torchrun "
                             "on a big corpus, so no process waits on another's preparation)")
    parser.add_argument("--force", action="store_true",
                        help="start over in out_dir even if it holds a checkpoint (which is replaced)")
    parser.add_argument("--eval-only", action="store_true",
                        help="print the loss, perplexity and bits/byte of the run in out_dir on its whole "
                             "val split (or on --text FILE), without training")
    parser.add_argument("--text", metavar="FILE", help="with --eval-only: evaluate on this UTF-8 text file")
    parser.add_argument("--export-hf", metavar="DIR",
                        help="write the run in out_dir to the new folder DIR as a Hugging Face GPT-2 "
                             "(config.json, model.safetensors, tokenizer files), without training")
    return parser


def flag_hint(arg):
    """What to type instead of an option train.py does not have (other tools' flag styles)."""
    from configs.load import full_key

    name, _, value = arg.lstrip("-").partition("=")
    if name == "config":
        return "give the config file as the first argument, without a flag: python train.py FILE.yaml"
    key = full_key(name)
    if key:
        return f"did you mean {key}={value or 'VALUE'}? (keys are set as key.path=value, without dashes)"
    return "keys are set as key.path=value; see --help for the keys"


def own_corpus_out_dir(config, overrides, shipped_data, path=DEFAULT_CONFIG):
    """A run on your own text never lands in the demo's folder: with data.source or data.mix
    given and no out_dir, the run goes to out/<source name> or out/<name>+<name> (a note says so).
    A config file other than the default that sets its own out_dir keeps it."""
    keys = {o.split("=", 1)[0].strip() for o in overrides}
    if "out_dir" in keys or (config.data.source, config.data.mix) == (shipped_data.source, shipped_data.mix):
        return None
    if Path(path).resolve() != Path(DEFAULT_CONFIG).resolve() and "out_dir" in _keys_of(path):
        return None
    if config.data.mix:
        from data.mix import parse_mix, source_name

        name = "+".join(source_name(e.source) for e in parse_mix(config.data.mix))
    else:
        name = Path(config.data.source.rstrip("/")).stem or "mine"
    derived = Path("out") / name.replace(":", "_")
    if Path(DEFAULT_CONFIG).is_file() and derived == Path(_out_dir_of(DEFAULT_CONFIG)):
        derived = derived.with_name(derived.name + "-own")  # never the demo's folder (my/default.txt)
    return str(derived)


def _out_dir_of(path):
    from configs.load import load_config

    return load_config(path).out_dir


def _keys_of(path):
    """The top-level keys a YAML config file sets itself."""
    import yaml

    raw = yaml.safe_load(Path(path).read_text()) or {}
    return set(raw) if isinstance(raw, dict) else set()


def run(args):
    from configs.load import load_config, to_yaml

    path, overrides = DEFAULT_CONFIG, list(args.args)
    if overrides and "=" not in overrides[0]:
        path = overrides.pop(0)
    config = load_config(path, overrides)
    out_dir = own_corpus_out_dir(config, overrides, load_config(path).data, path)  # the file's own data
    if out_dir:
        config.out_dir = out_dir
        data = config.data.source if not config.data.mix else "a mix"
        what = "the run folder read is" if args.eval_only or args.export_hf else "the run goes to"
        if not args.prepare_only:  # which writes no run folder
            print(f"note: data.source is {data}, so {what} out_dir={out_dir} (set out_dir to choose)",
                  file=sys.stderr)
    if args.print_config:
        print(to_yaml(config), end="")
        return 0
    from training.loop import TrainingStopped, train  # torch loads only when needed
    from training.start import evaluate_only, prepare_corpus, pretrained_start

    if args.prepare_only:
        pretrained = pretrained_start(config)  # fine-tuning prepares with the source's tokenizer
        for part in prepare_corpus(config, pretrained.tokenizer if pretrained else None).parts:
            meta = part.prepared.meta
            print(f"prepared {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens in {part.prepared.dir}")
        return 0
    if args.eval_only:
        print(evaluate_only(config, args.text))
        return 0
    if args.export_hf:
        from runs.export import export_hf

        names = export_hf(config.out_dir, args.export_hf)
        print(f"exported {config.out_dir} to {args.export_hf}: {', '.join(names)}")
        return 0
    try:
        with quiet_when_reader_leaves():
            train(config, force=args.force)
    except TrainingStopped as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


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
        from configs.load import describe, load_config

        shipped = load_config(DEFAULT_CONFIG) if Path(DEFAULT_CONFIG).is_file() else None
        parser = build_parser(describe(shipped))
        args, unknown = parser.parse_known_intermixed_args(argv)
        if unknown:
            parser.error(f"unknown option {unknown[0]}; {flag_hint(unknown[0])}")
        if args.text and not args.eval_only:
            parser.error("--text goes with --eval-only")
        return run(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a folder that cannot be made or written, a full disk, ...
        where = f" {e.filename}" if e.filename else ""
        if e.errno == errno.ENOSPC:
            print(f"error: the disk is full (writing{where or ' data'}); free some space, or choose another "
                  "out_dir / data.cache_dir on a disk that has it", file=sys.stderr)
        else:
            print(f"error: cannot use{where}: {e.strerror or e}; check the path and its permissions, "
                  "or choose another out_dir / data.cache_dir", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
