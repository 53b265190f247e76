"""An engine on a CPU for a release with no CPU build (run/cpu_engine.py): the ops its CPU
runner lacks, registered as its own bindings register them; the graft that carries them and
the plugin that loads them; the plugin lifting only the x86 refusal."""

from __future__ import annotations

import pytest

from conformance.core import catalogue
from conformance.core.catalogue import TOPUP_LIBRARY
from conformance.run import cpu_engine

# excerpts in the shape of vLLM 0.34.0's csrc/cpu/torch_bindings.cpp
BINDINGS = '''
torch::Tensor gumbel_sample_cpu(const torch::Tensor& logits,
                                bool apply_temperature, bool use_fp64);

namespace cpu_utils {
#ifdef VLLM_STANDALONE_CPU_MRV2
void gather_block_table_cpu(const torch::Tensor& block_table,
                            torch::Tensor& output,
                            const int64_t num_reqs_padded);
#endif
}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("init_cpu_memory_env(SymInt[] node_ids) -> ()", &init_cpu_memory_env);
#ifdef VLLM_STANDALONE_CPU_MRV2
  ops.def(
      "gather_block_table_cpu(Tensor block_table, Tensor(a1!) output, "
      "SymInt num_reqs_padded) -> ()",
      &cpu_utils::gather_block_table_cpu);
#endif
  ops.def(
      "gumbel_sample_cpu(Tensor logits, bool apply_temperature, bool use_fp64) -> Tensor");
  ops.impl("gumbel_sample_cpu", torch::kCPU, &gumbel_sample_cpu);
}
'''


def test_the_topup_registers_the_ops_as_the_releases_own_bindings_do():
    made = cpu_engine.bindings(BINDINGS, ("gather_block_table_cpu", "gumbel_sample_cpu"))
    assert "TORCH_LIBRARY_FRAGMENT(_C, ops)" in made  # beside the kernels' own library
    assert "namespace cpu_utils {\nvoid gather_block_table_cpu(" in made
    assert "torch::Tensor gumbel_sample_cpu(const torch::Tensor& logits," in made
    assert '"SymInt num_reqs_padded) -> ()",\n      &cpu_utils::gather_block_table_cpu);' in made
    assert 'ops.impl("gumbel_sample_cpu", torch::kCPU, &gumbel_sample_cpu);' in made
    assert "init_cpu_memory_env" not in made  # the kernels have it
    with pytest.raises(RuntimeError, match="defines no op post_update_cpu"):
        cpu_engine.bindings(BINDINGS, ("post_update_cpu",))


def test_a_graft_with_the_topup_carries_the_plugin_that_loads_it(tmp_path):
    from importlib import metadata

    wheel = tmp_path / "vllm-0.34.0"
    (wheel / "vllm").mkdir(parents=True)
    (wheel / "vllm" / "__init__.py").write_text("")
    kernels = tmp_path / "cpu-kernels" / "0.32.0"
    kernels.mkdir(parents=True)
    (kernels / "_C_AVX2.abi3.so").write_text("_C_AVX2")
    topup = tmp_path / "cpu-topup" / "0.34.0-torch2.13.0" / TOPUP_LIBRARY
    topup.parent.mkdir(parents=True)
    topup.write_text("ops")
    target = cpu_engine.grafted(wheel, kernels, "0.32.0", topup)
    assert target.name == "vllm-0.34.0+cpu-kernels-0.32.0+0.34.0-torch2.13.0"
    assert (target / "vllm" / TOPUP_LIBRARY).stat().st_ino == topup.stat().st_ino
    found = [e for d in metadata.distributions(path=[str(target)])
             for e in d.entry_points if e.group == "vllm.general_plugins"]
    assert [e.value for e in found] == [cpu_engine.PLUGIN]
    plain = cpu_engine.grafted(wheel, kernels, "0.32.0")  # 0.33.0's: no plugin
    assert not list(metadata.distributions(path=[str(plain)]))
    # the catalogue's rows say which releases need it: 0.34.0's row names its ops, a newer
    # release with no row takes them, an older one needs none
    assert catalogue.topup("0.34.0") is catalogue.topup("0.35.0") is not None
    assert catalogue.topup("0.34.0").ops[0] == "gather_block_table_cpu"
    assert catalogue.topup("0.33.0") is None


def test_the_plugin_lifts_the_x86_refusal_and_nothing_else(monkeypatch):
    """On 0.31.0's platform class, as a stand-in for 0.34.0's: the check its plugin wraps runs
    with HAS_TRITON read as True and restored after; the standalone runner is taken."""
    import vllm.platforms
    import vllm.triton_utils

    from conformance.subjects import cpu_runner

    platform = type(vllm.platforms.current_platform)
    seen = []

    def refusing(cls, vllm_config):
        from vllm.triton_utils import HAS_TRITON

        seen.append(HAS_TRITON)
        if not HAS_TRITON:
            raise RuntimeError("vLLM on x86 CPUs requires Triton (triton-cpu).")

    monkeypatch.setattr(platform, "check_and_update_config", classmethod(refusing))
    monkeypatch.setattr(platform, "uses_standalone_cpu_model_runner",
                        classmethod(lambda cls: False), raising=False)
    monkeypatch.setattr(platform, "import_kernels", classmethod(lambda cls: None))
    monkeypatch.setattr(vllm.triton_utils, "HAS_TRITON", False)
    monkeypatch.setattr(cpu_runner, "library", lambda: "the top-up")
    loaded = []
    monkeypatch.setattr("torch.ops.load_library", loaded.append)
    monkeypatch.setattr(platform, "_conformance_runner", False, raising=False)
    with pytest.raises(RuntimeError, match="requires Triton"):
        platform.check_and_update_config(None)
    cpu_runner.register()
    cpu_runner.register()  # vLLM loads plugins in every process, maybe twice: once is enough
    assert loaded == ["the top-up"]
    platform.check_and_update_config(None)
    assert seen == [False, True] and vllm.triton_utils.HAS_TRITON is False
    assert platform.uses_standalone_cpu_model_runner()
    assert cpu_runner.describe() == cpu_runner.RUNNER
