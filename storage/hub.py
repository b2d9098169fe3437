"""Files from the Hugging Face Hub: `hf:OWNER/NAME` models and `hf:OWNER/DATASET/PATH` dataset
files.

Every download goes through huggingface_hub.hf_hub_download into the hub's usual cache
(HF_HUB_CACHE, by default ~/.cache/huggingface/hub): it checks each transfer's size, keeps the
files of each commit together, and serves them again without network (offline, or with
HF_HUB_OFFLINE=1) once cached. Only the files named here are fetched, never a whole repository.

huggingface_hub is imported inside the functions, so `import storage.hub` costs nothing to
those who never name a hub file.
"""

import functools
import re
import socket
from pathlib import Path

PREFIX = "hf:"
# What a GPT-2 model folder needs: the config, the tokenizer's two files, and the weights.
MODEL_FILES = ("config.json", "vocab.json", "merges.txt")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # in order of preference
# The Hub's rule for user, organisation and repository names.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")


class _NotCached(ValueError):
    """The hub could not be reached (or is switched off) and the file is not in its cache."""


def is_hub_name(source) -> bool:
    return str(source).startswith(PREFIX)


def model_folder(source: str) -> Path:
    """`hf:NAME` or `hf:OWNER/NAME` -> the cached folder holding config.json, vocab.json,
    merges.txt and the weights (model.safetensors, or pytorch_model.bin when the repository has
    none), downloading what is missing. ValueError (one line) for a malformed name, a missing
    repository or file, or no network and no cached copy (saying how to place the folder by hand).
    """
    repo_id = _repo_id(source, "model")
    files = ", ".join(("config.json", WEIGHT_FILES[0]) + MODEL_FILES[1:])
    by_hand = (
        f"download {files} from {_web_url(repo_id, 'model')} into one folder and give that "
        f"folder's path instead of {source}"
    )
    config = _fetch(repo_id, "config.json", "model", None, by_hand)
    # Everything else from config.json's commit: the files of one folder belong to one version.
    # (hf_hub_download keeps each file at snapshots/<commit>/<filename>.)
    commit = config.parent.name
    for name in MODEL_FILES[1:]:
        _fetch(repo_id, name, "model", commit, by_hand)
    offline = None
    for name in WEIGHT_FILES:
        try:
            if _fetch(repo_id, name, "model", commit, by_hand, missing_ok=True) is not None:
                return config.parent
        except _NotCached as e:  # the other weights file may still be in the cache
            offline = offline or e
    if offline is not None:
        raise offline
    raise ValueError(
        f"{source} has neither {' nor '.join(WEIGHT_FILES)}; only GPT-2 checkpoints "
        f"in one of those files can be loaded"
    )


def dataset_file(source: str) -> Path:
    """`hf:OWNER/DATASET/PATH/IN/REPO` -> the cached path of that file of a dataset repository,
    downloaded on first use. ValueError (one line) as for model_folder."""
    repo_id, filename = _repo_id(source, "dataset")
    url = f"{_web_url(repo_id, 'dataset')}/resolve/main/{filename}"
    by_hand = f"download {url} and give that file's path instead of {source}"
    path = _fetch(repo_id, filename, "dataset", None, by_hand, missing_ok=True)
    if path is None:
        raise ValueError(
            f"the dataset {repo_id} has no file {filename}; see "
            f"{_web_url(repo_id, 'dataset')}/tree/main for its files"
        )
    return path


def cached_model_file(repo_id: str, filename: str) -> Path | None:
    """The cached copy of a model repository's file, or None; never touches the network."""
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(repo_id, filename)
    return Path(path) if isinstance(path, str) else None


def hub_reachable() -> bool:
    """Whether the hub's endpoint (HF_ENDPOINT) answers a TCP connection within a few seconds:
    asked once per endpoint and process, so an offline machine learns it at once instead of
    through the client's retries. False with HF_HUB_OFFLINE set."""
    from huggingface_hub import constants

    return not constants.HF_HUB_OFFLINE and _answers(constants.ENDPOINT)


@functools.cache
def _answers(endpoint: str, timeout: float = 3.0) -> bool:
    from urllib.parse import urlsplit

    url = urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:  # no route, no name resolution, refused, timed out
        return False


def _repo_id(source: str, kind: str):
    """The repository id of an `hf:` model name; (repository id, path) of an `hf:` dataset file."""
    parts = str(source)[len(PREFIX) :].split("/")
    n_repo = min(len(parts), 2)
    well_formed = (
        is_hub_name(source)
        and all(_NAME.fullmatch(p) and "--" not in p and ".." not in p for p in parts[:n_repo])
        and (
            len(parts) <= 2
            if kind == "model"
            else len(parts) >= 3 and all(p not in ("", ".", "..") for p in parts[2:])
        )
    )
    if not well_formed:
        example = (
            "OWNER/NAME, e.g. hf:openai-community/gpt2"
            if kind == "model"
            else "OWNER/DATASET/PATH/IN/REPO, e.g. "
            "hf:roneneldan/TinyStories/TinyStoriesV2-GPT4-train.txt"
        )
        raise ValueError(f"{source} is not a Hugging Face {kind} name: write {PREFIX}{example}")
    repo_id = "/".join(parts[:n_repo])
    return repo_id if kind == "model" else (repo_id, "/".join(parts[2:]))


def _web_url(repo_id: str, repo_type: str) -> str:
    from huggingface_hub import constants

    return f"{constants.ENDPOINT}/{'datasets/' if repo_type == 'dataset' else ''}{repo_id}"


def _fetch(repo_id, filename, repo_type, revision, by_hand, missing_ok=False) -> Path | None:
    """hf_hub_download of one file -> its cached path; None if the repository has no such file
    and missing_ok; _NotCached (carrying `by_hand`) if the hub is out of reach and the file is
    not cached; ValueError (one line) for anything else."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        LocalEntryNotFoundError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{PREFIX}{repo_id}" if repo_type == "model" else f"the dataset {repo_id}"
    try:
        # Out of reach, the hub's client would retry for ~20 s before giving up: read the cache.
        return Path(
            hf_hub_download(
                repo_id,
                filename,
                repo_type=repo_type,
                revision=revision,
                local_files_only=not hub_reachable(),
            )
        )
    except RemoteEntryNotFoundError:
        if missing_ok:
            return None
        raise ValueError(
            f"{where} has no {filename}; a GPT-2 folder needs "
            f"{', '.join(MODEL_FILES)} and {' or '.join(WEIGHT_FILES)}"
        ) from None
    except LocalEntryNotFoundError:  # offline, or the hub unreachable, and not in the cache
        raise _NotCached(
            f"cannot fetch {filename} of {where}: the Hugging Face Hub is out of reach "
            f"(offline? HF_HUB_OFFLINE=1 says so at once) and the file is not in its cache; "
            f"{by_hand}"
        ) from None
    except RepositoryNotFoundError:  # gated and private repositories answer the same
        raise ValueError(
            f"no {repo_type} repository {repo_id} on the Hugging Face Hub (or it is "
            f"private or gated: log in with `hf auth login`); check the name"
        ) from None
    except RevisionNotFoundError:  # a commit pinned by model_folder, gone meanwhile
        raise ValueError(f"{where} has no revision {revision or 'main'}; run again") from None
    # HfHubHTTPError, OSError, and the HTTP client's own (a bad HF_ENDPOINT)
    except Exception as e:  # noqa: BLE001
        reason = " ".join(str(e).split())[:200] or type(e).__name__
        raise ValueError(
            f"could not download {filename} of {where} ({reason}); {by_hand}"
        ) from None
