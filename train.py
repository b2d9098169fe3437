"""Train a GPT: python train.py [CONFIG] [key.path=value ...]

    python train.py                                  # configs/default.yaml
    python train.py configs/shakespeare_char_cpu.yaml train.max_iters=500
    python train.py configs/gpt2_124m.yaml --prepare-only   # tokenise once, before torchrun
    torchrun --standalone --nproc_per_node=4 train.py configs/gpt2_124m.yaml
"""

import argparse
import sys

DEFAULT_CONFIG = "configs/default.yaml"


def build_parser(describe):
    parser = argparse.ArgumentParser(
        prog="train.py",
        description="Train a GPT as a YAML config says. Keys can be overridden as key.path=value.",
        epilog="config keys (type, default, meaning):\n" + describe(),
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
    return parser


def run(args):
    from configs.schema import load_config, to_yaml

    path, overrides = DEFAULT_CONFIG, list(args.args)
    if overrides and "=" not in overrides[0]:
        path = overrides.pop(0)
    config = load_config(path, overrides)
    if args.print_config:
        print(to_yaml(config), end="")
        return 0
    from training.loop import TrainingStopped, prepare_corpus, train  # torch loads only when needed

    if args.prepare_only:
        prepared = prepare_corpus(config)
        print(f"prepared {prepared.meta['train_tokens']:,} train and {prepared.meta['val_tokens']:,} "
              f"val tokens in {prepared.dir}")
        return 0
    try:
        train(config, force=args.force)
    except TrainingStopped as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    try:
        from configs.schema import describe

        args = build_parser(describe).parse_intermixed_args(argv)
        return run(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a folder that cannot be made or written, ...
        where = f" {e.filename}" if e.filename else ""
        print(f"error: cannot use{where}: {e.strerror or e}; check the path and its permissions, "
              "or choose another out_dir / data.cache_dir", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
