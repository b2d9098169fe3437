"""The GPU path's decisions, tested on any machine: device, dtype, peak FLOP/s, MFU, padding,
the loss scaler on resume, and dropout seeds."""

import contextlib
import json

import pytest
import torch

from model.device import Machine, choose_dtype, cpu_bf16_native, fast_matmul_dtype, resolve_device
from model.gpt import GPT, GPTConfig, lm_loss
from model.sampling import generate
from tests.helpers import read_only_folder, run_script
from training.peak import gpu_peak_flops, mfu
from training.resume import load_scaler_state
from training.runtime import compile_problem, torchrun_env
from training.seeds import dropout_seed

NO_GPU = Machine()
TWO_GPUS = Machine(cuda_count=2, cuda_current=1)


@pytest.mark.parametrize(
    "name, machine, world, local, expected",
    [
        ("auto", NO_GPU, 1, 0, "cpu"),
        ("auto", Machine(mps=True), 1, 0, "mps"),
        ("auto", TWO_GPUS, 1, 0, "cuda:1"),  # a bare GPU choice is the current GPU, with its index
        ("cuda", Machine(cuda_count=1), 1, 0, "cuda:0"),
        ("cuda", TWO_GPUS, 1, 0, "cuda:1"),
        ("cuda:0", TWO_GPUS, 1, 0, "cuda:0"),
        ("auto", TWO_GPUS, 2, 1, "cuda:1"),  # torchrun: each process its local rank's GPU
        ("cuda", TWO_GPUS, 2, 0, "cuda:0"),
        ("cpu", TWO_GPUS, 2, 1, "cpu"),
        ("cpu:1", NO_GPU, 1, 0, "cpu"),
    ],
)
def test_device_resolution_always_gives_a_cuda_device_its_index(
    name, machine, world, local, expected
):
    device = resolve_device(name, machine, world, local)
    assert device == torch.device(expected)
    if device.type == "cuda":
        assert device.index is not None  # torch.cuda.set_device(torch.device("cuda")) raises


@pytest.mark.parametrize(
    "name, machine, world, local, message",
    [
        ("cuda", NO_GPU, 1, 0, "no CUDA GPU"),
        ("cuda:2", TWO_GPUS, 1, 0, "2 are visible"),
        ("auto", TWO_GPUS, 4, 3, "2 are visible"),  # more processes than GPUs
        ("cuda:1", TWO_GPUS, 2, 0, r"cuda:1.*torchrun.*\b2\b"),
        ("mps", NO_GPU, 1, 0, "MPS.*not available"),
        ("tpu", NO_GPU, 1, 0, "unknown device 'tpu'"),
        ("cuda:x", NO_GPU, 1, 0, "unknown device"),
        ("", NO_GPU, 1, 0, "unknown device"),
        ("meta", NO_GPU, 1, 0, "unsupported device 'meta'"),
    ],
)
def test_device_resolution_errors_are_one_line(name, machine, world, local, message):
    with pytest.raises(ValueError, match=message) as e:
        resolve_device(name, machine, world, local)
    assert "\n" not in str(e.value)


def test_torchrun_environment():
    assert torchrun_env({}) == (0, 0, 1)
    assert torchrun_env({"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8"}) == (5, 1, 8)


@pytest.mark.parametrize(
    "name, device_type, native, expected",
    [
        ("auto", "cuda", True, torch.bfloat16),
        (
            "auto",
            "cuda",
            False,
            torch.float16,
        ),  # V100, T4: bf16 only emulated, so fp16 + GradScaler
        ("auto", "cpu", False, torch.float32),
        ("auto", "mps", False, torch.float32),
        ("bfloat16", "cpu", False, torch.bfloat16),
        ("float32", "cuda", True, torch.float32),
    ],
)
def test_dtype_choice(name, device_type, native, expected):
    assert choose_dtype(name, device_type, native) == expected


# torch.cpu.get_capabilities() of three kinds of machine, cut to the keys that matter.
AVX2_ONLY = {"avx2": True, "avx512_f": False, "avx512_bf16": False, "amx_bf16": False}
AVX512_BF16 = {"avx2": True, "avx512_f": True, "avx512_bf16": True, "amx_bf16": False}
SAPPHIRE_RAPIDS = {"avx2": True, "avx512_f": True, "avx512_bf16": True, "amx_bf16": True}
SKYLAKE_X = {"avx2": True, "avx512_f": True, "avx512_bf16": False, "amx_bf16": False}
ARM = {"architecture": "aarch64"}


@pytest.mark.parametrize(
    "capabilities, onednn_isa, native",
    [
        (AVX2_ONLY, None, False),
        (SKYLAKE_X, None, False),  # AVX-512 without its bf16 instructions
        (ARM, None, False),  # nothing known: float32 is never the slow choice
        (AVX512_BF16, None, True),
        (SAPPHIRE_RAPIDS, None, True),
        (AVX512_BF16, "avx2", False),  # oneDNN capped below bf16: emulated again
        (SAPPHIRE_RAPIDS, "AVX512_CORE_VNNI", False),
        (AVX512_BF16, "AVX512_CORE_BF16", True),
        (SAPPHIRE_RAPIDS, "AVX512_CORE_AMX", True),
    ],
)
def test_cpu_bf16_is_native_only_with_its_instructions(capabilities, onednn_isa, native):
    assert cpu_bf16_native(capabilities, onednn_isa) is native


@pytest.mark.parametrize(
    "device_type, native, expected",
    [
        ("cpu", cpu_bf16_native(AVX2_ONLY), torch.float32),  # emulated bf16: 14-45x slower matmuls
        ("cpu", cpu_bf16_native(AVX512_BF16), torch.bfloat16),
        ("cuda", True, torch.bfloat16),  # Ampere and newer
        ("cuda", False, torch.float32),  # a V100: bf16 emulated
        ("mps", False, torch.float32),
    ],
)
def test_fast_matmul_dtype_for_each_kind_of_machine(device_type, native, expected):
    assert fast_matmul_dtype(device_type, native) == expected


def test_float16_off_cuda_is_refused():
    with pytest.raises(ValueError, match="float16.*CUDA"):
        choose_dtype("float16", "cpu")


@pytest.mark.parametrize(
    "name, tflops",
    [
        ("NVIDIA H100 80GB HBM3", 989),
        ("NVIDIA H100 PCIe", 756),
        ("NVIDIA H100 NVL", 835),
        ("NVIDIA H200", 989),
        ("NVIDIA H200 NVL", 835),
        ("NVIDIA GH200 480GB", 989),
        ("NVIDIA A100-SXM4-80GB", 312),
        ("NVIDIA A100-PCIE-40GB", 312),
        ("NVIDIA A10G", 125),
        ("NVIDIA L40S", 362),
        ("NVIDIA L40", 181),
        ("NVIDIA L4", 121),
        ("NVIDIA GeForce RTX 4090", 165),
        ("NVIDIA GeForce RTX 3090", 71),
        ("Tesla V100-SXM2-16GB", 125),
        ("Tesla T4", 65),
    ],
)
def test_peak_flops_lookup_takes_the_most_specific_name(name, tflops):
    assert gpu_peak_flops(name) == tflops * 1e12


@pytest.mark.parametrize("name", ["NVIDIA GeForce GTX 1080", "NVIDIA L45", "Radeon RX 7900"])
def test_an_unknown_gpu_has_no_peak(name):
    assert gpu_peak_flops(name) is None


def test_cpu_peak_is_measured_once_per_machine_and_thread_count(tmp_path, monkeypatch):
    from training import peak

    measured = []  # thread counts measured at: a machine where each thread adds 1e11

    def measure(device):
        measured.append(torch.get_num_threads())
        return 1e11 * torch.get_num_threads()

    monkeypatch.setattr(peak, "measured_matmul_flops", measure)
    threads = torch.get_num_threads()
    assert peak.cpu_peak_flops(tmp_path) == 1e11 * threads
    count = len(measured)
    assert peak.cpu_peak_flops(tmp_path) == 1e11 * threads and len(measured) == count  # kept
    assert peak.peak_flops(torch.device("cpu"), None, tmp_path) == 1e11 * threads
    try:
        torch.set_num_threads(threads + 1)  # another thread count has another peak
        assert peak.cpu_peak_flops(tmp_path) == 1e11 * (threads + 1)
    finally:
        torch.set_num_threads(threads)
    assert torch.get_num_threads() == threads  # the one-thread measurement gives the threads back
    count = len(measured)
    assert peak.cpu_peak_flops(tmp_path) == 1e11 * threads and len(measured) == count  # both kept
    assert (
        peak.cpu_peak_flops(None) == 1e11 * threads and len(measured) > count
    )  # no cache: measured


def test_a_peak_measured_on_busy_cores_is_measured_again_and_never_kept(tmp_path, monkeypatch):
    from training import peak

    busy = {"on": True}
    # Busy: two threads measure below one (13.6 against 52.7 GFLOP/s, as a user saw).
    monkeypatch.setattr(
        peak,
        "measured_matmul_flops",
        lambda device: (
            (13.6e9 if busy["on"] else 100e9) if torch.get_num_threads() == 2 else 52.7e9
        ),
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert peak.cpu_peak_flops(tmp_path) == 52.7e9  # the better figure, not the busy one
        assert not (tmp_path / "cpu_peak_flops.json").exists()  # and nothing kept
        busy["on"] = False
        assert peak.cpu_peak_flops(tmp_path) == 100e9
    finally:
        torch.set_num_threads(threads)
    kept = json.loads((tmp_path / "cpu_peak_flops.json").read_text())
    assert [v["flops"] for v in kept.values()] == [100e9]
    assert peak.plausible_peak(100e9, 52.7e9) and not peak.plausible_peak(13.6e9, 52.7e9)


@pytest.mark.parametrize("content", ["not json", "[1, 2]", '{"x": 1}'])
def test_a_damaged_peak_file_is_measured_again_and_replaced(tmp_path, monkeypatch, content):
    from training import peak

    monkeypatch.setattr(peak, "measured_matmul_flops", lambda device: 5e10)
    (tmp_path / "cpu_peak_flops.json").write_text(content)
    assert peak.cpu_peak_flops(tmp_path) == 5e10
    assert 5e10 in [
        v["flops"]
        for v in json.loads((tmp_path / "cpu_peak_flops.json").read_text()).values()
        if isinstance(v, dict)
    ]


def test_a_read_only_cache_still_gives_the_peak(tmp_path, monkeypatch):
    from training import peak

    monkeypatch.setattr(peak, "measured_matmul_flops", lambda device: 5e10)
    folder = tmp_path / "ro"
    with contextlib.ExitStack() as stack:
        if not read_only_folder(stack, folder):
            pytest.skip("running as root without permission to mount a tmpfs to remount read-only")
        assert peak.cpu_peak_flops(folder) == 5e10
        assert not (folder / "cpu_peak_flops.json").exists()


def test_mfu_divides_by_every_process_peak():
    assert mfu(100.0, 10.0, 2000.0, 1) == pytest.approx(0.5)
    assert mfu(100.0, 20.0, 2000.0, 2) == pytest.approx(0.5)  # twice the tokens from twice the GPUs
    assert mfu(100.0, 10.0, None, 1) is None


def test_padded_vocabulary_is_never_scored_or_sampled(tiny_gpt):
    model = tiny_gpt(n_layer=1, n_head=2, n_embd=16, vocab_multiple=64).eval()
    assert model.tok_emb.weight.shape[0] == 64 and model.config.padded_vocab_size == 64
    with torch.no_grad():  # make the 14 padding rows win every argmax, were they scored
        model.ln_f.bias.fill_(1.0)
        model.lm_head.weight[50:] = 100.0
    hidden = {}
    model.ln_f.register_forward_hook(lambda module, inputs, output: hidden.update(h=output))
    idx = torch.randint(0, 50, (2, 8))
    logits = model(idx)
    full = model.lm_head(hidden["h"])  # (2, 8, 64): what an unpadded head would return
    assert logits.shape == (2, 8, 50) and torch.equal(logits, full[..., :50])
    assert (full[..., 50:].amax(-1) > full[..., :50].amax(-1)).all()
    assert lm_loss(logits, idx).item() == pytest.approx(
        torch.nn.functional.cross_entropy(full[..., :50].flatten(0, 1), idx.flatten()).item()
    )
    for temperature in (0.0, 1.0):
        out = torch.cat(list(generate(model, idx[:1, :2], 20, temperature=temperature)))
        assert int(out.max()) < 50


def test_unpadded_config_keeps_its_table():
    model = GPT(
        GPTConfig(vocab_size=65, block_size=8, n_layer=1, n_head=1, n_embd=8, vocab_multiple=1)
    )
    assert model.tok_emb.weight.shape[0] == 65


def test_fp16_resume_from_a_bf16_checkpoint_starts_a_fresh_scaler():
    scaler = torch.amp.GradScaler("cpu", enabled=True)
    bf16_state = torch.amp.GradScaler("cpu", enabled=False).state_dict()
    assert bf16_state == {}
    assert "starts afresh" in load_scaler_state(scaler, bf16_state)
    assert scaler.get_scale() == 65536.0
    trained = torch.amp.GradScaler("cpu", enabled=True, init_scale=8.0)
    trained._lazy_init_scale_growth_tracker(torch.device("cpu"))
    assert load_scaler_state(scaler, trained.state_dict()) is None and scaler.get_scale() == 8.0
    assert (
        load_scaler_state(torch.amp.GradScaler("cpu", enabled=False), trained.state_dict()) is None
    )


def test_dropout_seeds_differ_by_process_and_step():
    seeds = {dropout_seed(1337, step, rank) for step in range(50) for rank in range(8)}
    assert len(seeds) == 400 and all(0 <= s < 2**63 for s in seeds)


@pytest.mark.parametrize(
    "device, programs, headers, says",
    [
        ("cpu", {"g++"}, False, None),  # a CPU needs no Python headers
        ("cpu", {"gcc"}, True, "no C++ compiler"),
        ("cpu", {"clang++"}, False, None),
        ("cuda", {"gcc"}, True, None),
        ("cuda", set(), True, "no C compiler"),
        ("cuda", {"cc"}, False, "no Python headers"),
        ("mps", set(), False, None),
    ],
)
def test_what_torch_compile_needs_on_each_device(tmp_path, device, programs, headers, says):
    if headers:
        (tmp_path / "Python.h").write_text("")
    problem = compile_problem(
        device, which=lambda name: name if name in programs else None, python_include=str(tmp_path)
    )
    assert problem == says if says is None else says in problem


@pytest.mark.slow
def test_compile_without_a_compiler_is_one_line_that_says_how_to_turn_it_off(corpus, tmp_path):
    import os

    r = run_script(
        "train.py",
        f"data.source={corpus / 'text.txt'}",
        "train.compile=true",
        "train.device=cpu",
        f"out_dir={tmp_path / 'run'}",
        env=dict(os.environ, PATH=str(tmp_path)),
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "no C++ compiler" in r.stderr and "train.compile=false" in r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "name, dtype, tflops",
    [
        ("NVIDIA H100 80GB HBM3", torch.bfloat16, 989),
        ("NVIDIA H100 80GB HBM3", torch.float16, 989),
        ("NVIDIA H100 80GB HBM3", torch.float32, 494.5),  # TF32 tensor cores: half the bf16 rate
        ("NVIDIA A100-SXM4-80GB", torch.float32, 156),
        ("Tesla V100-SXM2-16GB", torch.float16, 125),
        ("Tesla V100-SXM2-16GB", torch.float32, 15.7),  # no TF32: plain fp32
        ("Tesla T4", torch.float32, 8.1),
    ],
)
def test_an_fp32_run_counts_mfu_against_the_fp32_peak(name, dtype, tflops):
    assert gpu_peak_flops(name, dtype) == pytest.approx(tflops * 1e12)


def test_the_kv_cache_follows_autocast(tiny_gpt):
    model = tiny_gpt().eval()
    assert model.new_caches(1)[0].k.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model.new_caches(1)[0].k.dtype == torch.bfloat16
        idx = torch.tensor([[1, 2, 3]])
        cached = torch.stack(list(generate(model, idx, 6, temperature=0.0)))
        uncached = torch.stack(list(generate(model, idx, 6, temperature=0.0, use_cache=False)))
    assert torch.equal(cached, uncached)
