"""hf:OWNER/NAME models and hf:OWNER/DATASET/PATH corpora (storage/hub.py), fetched from a fake
Hugging Face Hub: a real HTTP server on 127.0.0.1 (tests/fakehub.py). Nothing leaves the machine."""

import io

import pytest
import torch

import generate
from data.sources import open_source
from runs.loading import load_run
from storage.hub import dataset_file, model_folder
from tests.fakehub import FakeHub, tiny_gpt2_folder, use_hub
from tests.helpers import ROOT, one_line

pytest.importorskip(
    "transformers", reason="makes the tiny GPT-2: pip install -r requirements-test.txt"
)
pytest.importorskip("huggingface_hub", reason="pip install -r requirements.txt")

MODEL_FILES = ["config.json", "vocab.json", "merges.txt", "model.safetensors"]
STORY = "Once upon a time there was a small owl.\nIt was hungry, so it flew to the barn.\n"


@pytest.fixture(scope="module")
def gpt2_bin(tmp_path_factory):
    return tiny_gpt2_folder(tmp_path_factory.mktemp("gpt2-bin"), bin_file=True)


@pytest.fixture
def hub(gpt2_folder, gpt2_bin, tmp_path, monkeypatch):
    """A hub with a GPT-2 (plus files a loader must not fetch), an old one with only a
    pytorch_model.bin, and a dataset; huggingface_hub pointed at it, with an empty cache."""
    model = {p.name: p.read_bytes() for p in gpt2_folder.iterdir()}
    model.update(
        {
            "README.md": b"# tiny",
            "pytorch_model.bin": (gpt2_bin / "pytorch_model.bin").read_bytes(),
            "flax_model.msgpack": b"\0" * 100,
        }
    )
    old = {p.name: p.read_bytes() for p in gpt2_bin.iterdir()}
    dataset = {"stories/train.txt": STORY.encode(), "README.md": b"# stories"}
    server = FakeHub(
        {
            ("model", "tiny/gpt2"): model,
            ("model", "tinygpt2"): model,
            ("model", "old/gpt2"): old,
            ("dataset", "someone/stories"): dataset,
        }
    )
    use_hub(monkeypatch, server.url, tmp_path / "hf-cache")
    yield server
    server.close()


def same_logits(a, b):
    ids = torch.tensor([[1, 5, 9, 30, 2]])
    with torch.no_grad():
        return torch.equal(a.model(ids), b.model(ids))


# --- models ------------------------------------------------------------------------------------


def test_hf_name_fetches_only_the_four_files_and_loads_like_the_folder(hub, gpt2_folder):
    run = load_run("hf:tiny/gpt2")
    assert same_logits(run, load_run(gpt2_folder))
    assert sorted(hub.fetched("GET")) == sorted(
        f"/tiny/gpt2/resolve/{rev}/{name}"
        for name, rev in zip(
            MODEL_FILES, ["main"] + ["0123456789abcdef0123456789abcdef01234567"] * 3
        )
    )
    assert run.meta["source"] == "hf:tiny/gpt2" and run.meta["tokenizer_kind"] == "gpt2"
    load_run("hf:tiny/gpt2")  # cached: asked again (HEAD), never downloaded again
    assert len(hub.fetched("GET")) == 4


def test_a_name_without_owner_works(hub):
    assert load_run("hf:tinygpt2").model.config.n_layer == 2


def test_a_repository_with_only_pytorch_model_bin(hub, gpt2_folder):
    run = load_run("hf:old/gpt2")
    assert same_logits(run, load_run(gpt2_folder))
    assert any(path.endswith("/pytorch_model.bin") for path in hub.fetched("GET"))


def test_offline_with_the_files_cached_works(hub, monkeypatch):
    online = load_run("hf:tiny/gpt2")
    hub.close()
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    assert same_logits(load_run("hf:tiny/gpt2"), online)


def test_offline_without_cache_says_how_to_place_the_folder_by_hand(hub, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(ValueError) as err:
        load_run("hf:tiny/gpt2")
    # why, what to download by hand, from where, and what the folder replaces
    one_line(
        err,
        "out of reach",
        "cache",
        "config.json",
        "model.safetensors",
        "vocab.json",
        "merges.txt",
        f"{hub.url}/tiny/gpt2",
        "hf:tiny/gpt2",
    )
    assert hub.fetched("HEAD") == hub.fetched("GET") == []


def test_a_missing_repository_and_a_missing_file(hub):
    with pytest.raises(ValueError) as err:
        model_folder("hf:nobody/nothing")
    one_line(err, "repository", "nobody/nothing")
    hub.repos[("model", "half/gpt2")] = {"config.json": b"{}"}
    with pytest.raises(ValueError) as err:
        model_folder("hf:half/gpt2")
    one_line(err, "hf:half/gpt2", "vocab.json")


@pytest.mark.parametrize(
    "name", ["hf:", "hf:a/b/c", "hf:bad name", "hf:-dash", "hf:a//b", "hf:a--b/c", "hf:owner/x..y"]
)
def test_malformed_model_names(name):
    with pytest.raises(ValueError) as err:
        model_folder(name)
    message = one_line(err, "hf:OWNER/NAME")  # the form to write, and the name given
    assert name in message.replace("hf:OWNER/NAME", "")


def test_generate_samples_from_an_hf_name(hub):
    out, err = io.StringIO(), io.StringIO()
    code = generate.main(
        [
            "--ckpt",
            "hf:tiny/gpt2",
            "--device",
            "cpu",
            "--prompt",
            "the owl",
            "--max-new-tokens",
            "8",
            "--temperature",
            "0",
        ],
        out=out,
        err=err,
    )
    assert code == 0, err.getvalue()
    assert out.getvalue().startswith("the owl") and len(out.getvalue()) > len("the owl\n")


def test_generate_attention_and_probe_on_a_gpt2_folder(gpt2_folder):
    out, err = io.StringIO(), io.StringIO()
    code = generate.main(
        [
            "--ckpt",
            str(gpt2_folder),
            "--device",
            "cpu",
            "--attention",
            "The dog ate because it was hungry.",
        ],
        out=out,
        err=err,
    )
    assert code == 0, err.getvalue()
    assert "L1 H1" in out.getvalue()
    out = io.StringIO()
    code = generate.main(
        ["--ckpt", str(gpt2_folder), "--device", "cpu", "--probe", "--json", "--permutations", "5"],
        out=out,
        err=err,
    )
    assert code == 0, err.getvalue()
    assert '"best_head"' in out.getvalue()


# --- datasets ----------------------------------------------------------------------------------


def test_a_dataset_file_is_a_data_source(hub, tmp_path):
    source = open_source("hf:someone/stories/stories/train.txt", tmp_path / "cache")
    assert source.read_text() == STORY
    assert hub.fetched("GET") == ["/datasets/someone/stories/resolve/main/stories/train.txt"]


def test_a_dataset_file_offline_from_the_cache_and_without_it(hub, tmp_path, monkeypatch):
    path = dataset_file("hf:someone/stories/stories/train.txt")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    assert dataset_file("hf:someone/stories/stories/train.txt") == path
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(ValueError) as err:
        open_source("hf:someone/stories/stories/train.txt", tmp_path / "cache")
    one_line(
        err, f"{hub.url}/datasets/someone/stories/resolve/main/stories/train.txt"
    )  # to download


def test_a_dataset_file_that_does_not_exist(hub):
    with pytest.raises(ValueError) as err:
        dataset_file("hf:someone/stories/stories/test.txt")
    one_line(err, "someone/stories", "stories/test.txt")


@pytest.mark.parametrize(
    "name", ["hf:someone/stories", "hf:someone/stories/", "hf:someone", "hf:x/y/../z"]
)
def test_malformed_dataset_names(name):
    with pytest.raises(ValueError) as err:
        dataset_file(name)
    assert "write hf:OWNER/DATASET/PATH/IN/REPO" in one_line(err)


def test_importing_storage_hub_does_not_import_huggingface_hub():
    import subprocess
    import sys

    code = "import sys, storage.hub; sys.exit('huggingface_hub' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_a_hub_that_does_not_answer_is_read_from_the_cache_at_once(hub, monkeypatch, tmp_path):
    import socket

    import huggingface_hub

    load_run("hf:tiny/gpt2")  # now cached
    with socket.socket() as s:  # a port on 127.0.0.1 where nothing listens
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", f"http://127.0.0.1:{closed}")
    asked = []
    real = huggingface_hub.hf_hub_download

    def recording(*args, **kwargs):
        asked.append(kwargs.get("local_files_only"))
        return real(*args, **kwargs)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", recording)
    load_run("hf:tiny/gpt2")  # served by the cache, the client never sent to retry
    assert asked and all(asked)
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE=1") as err:
        load_run("hf:tiny/other")
    one_line(err, "hf:tiny/other")
