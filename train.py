"""Train a GPT: python train.py [CONFIG] [key.path=value ...]

    python train.py                                  # configs/default.yaml
    python train.py configs/shakespeare_char_cpu.yaml train.max_iters=500
    torchrun --standalone --nproc_per_node=4 train.py configs/gpt2_124m.yaml
"""

import argparse
import sys

from configs.schema import describe, load_config, to_yaml

DEFAULT_CONFIG = "configs/default.yaml"


def build_parser():
    parser = argparse.ArgumentParser(
        prog="train.py",
        description="Train a GPT as a YAML config says. Keys can be overridden as key.path=value.",
        epilog="config keys (type, default, meaning):\n" + describe(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("args", nargs="*", metavar="CONFIG | key.path=value",
                        help=f"a YAML file (default {DEFAULT_CONFIG}), then overrides")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("--force", action="store_true", help="with train.resume=never, overwrite an existing checkpoint")
    return parser


def main(argv=None):
    args = build_parser().parse_intermixed_args(argv)
    path = DEFAULT_CONFIG
    overrides = list(args.args)
    if overrides and "=" not in overrides[0]:
        path = overrides.pop(0)
    try:
        config = load_config(path, overrides)
        if args.print_config:
            print(to_yaml(config), end="")
            return 0
        from training.loop import TrainingStopped, train  # torch loads only when training

        try:
            train(config, force=args.force)
        except TrainingStopped as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
