// Model, reward, catalog and live sections of the experiment schema (docs/configs.md).
#include "experiments/config_parts.h"

namespace shardgym {
namespace config_detail {

ModelSpec parse_model(const YamlField& f) {
  f.check_keys({"name", "layers", "hidden", "heads", "kv_heads", "ffn", "seq", "micro_batch",
                "global_batch", "vocab", "dtype", "mixed_precision", "main_grads_fp32",
                "flash_attention", "arch", "norm", "activation", "position", "bias", "dropout",
                "tied_embeddings", "implementation"});
  ModelSpec m;
  if (auto name = f.optional("name")) m.name = name->as_string();
  m.layers = f.child("layers").as_int(1, 4096);
  m.hidden = f.child("hidden").as_int(1);
  m.heads = f.child("heads").as_int(1);
  m.seq = f.child("seq").as_int(1);
  if (auto ffn = f.optional("ffn")) m.ffn = ffn->as_int(0);
  // The block family first (docs/configs.md "Model shapes"), then each trait on its own.
  if (auto arch = f.optional("arch"); arch && arch->as_choice({"gpt", "llama"}) == "llama")
    m.set_llama_traits();
  if (auto kv = f.optional("kv_heads")) m.kv_heads = kv->as_int(0, m.heads);
  if (auto v = f.optional("norm")) m.rmsnorm = v->as_choice({"layernorm", "rmsnorm"}) == "rmsnorm";
  if (auto v = f.optional("activation")) m.swiglu = v->as_choice({"gelu", "swiglu"}) == "swiglu";
  if (auto v = f.optional("position")) m.rotary = v->as_choice({"learned", "rotary"}) == "rotary";
  if (auto v = f.optional("bias")) m.linear_bias = v->as_bool();
  if (auto v = f.optional("dropout")) m.dropout = v->as_bool();
  if (auto v = f.optional("tied_embeddings")) m.tied_embeddings = v->as_bool();
  // Whose layers the simulator's memory follows (model_spec.h live_layers): a live section sets
  // `live` (experiments/config.cpp).
  if (auto v = f.optional("implementation"))
    m.live_layers = v->as_choice({"megatron", "live"}) == "live";
  if (m.kv_heads > 0 && m.heads % m.kv_heads != 0)
    f.child("kv_heads").fail(std::to_string(m.kv_heads) + " key/value heads do not divide " +
                             std::to_string(m.heads) + " heads (each query group has as many)");
  if (auto mb = f.optional("micro_batch")) m.micro_batch = mb->as_int(1);
  if (auto gb = f.optional("global_batch")) m.global_batch = gb->as_int(0);
  if (auto vocab = f.optional("vocab")) m.vocab = vocab->as_int(1);
  if (auto dtype = f.optional("dtype")) {
    std::string d = dtype->as_choice(
        {"bf16", "fp16", "fp32", "fp64", "bfloat16", "float16", "float32", "float64"});
    if (d == "bf16" || d == "bfloat16") m.dtype = DType::kBFloat16;
    if (d == "fp16" || d == "float16") m.dtype = DType::kFloat16;
    if (d == "fp32" || d == "float32") m.dtype = DType::kFloat32;
    if (d == "fp64" || d == "float64") m.dtype = DType::kFloat64;
  }
  if (auto mp = f.optional("mixed_precision")) m.mixed_precision = mp->as_bool();
  if (auto g = f.optional("main_grads_fp32")) m.main_grads_fp32 = g->as_bool();
  if (auto fa = f.optional("flash_attention")) m.flash_attention = fa->as_bool();
  if (m.hidden % m.heads != 0) {
    f.child("heads").fail(std::to_string(m.heads) + " heads do not divide hidden size " +
                          std::to_string(m.hidden));
  }
  std::string problem = m.validate();
  if (!problem.empty()) f.fail(problem);
  return m;
}

void parse_training(const YamlField& f, ModelSpec& m) {
  f.check_keys({"distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather",
                "tp_comm_overlap", "overlap_p2p_comm", "vocab_parallel"});
  if (auto v = f.optional("distributed_optimizer")) m.distributed_optimizer = v->as_bool();
  if (auto v = f.optional("overlap_grad_reduce")) m.overlap_grad_reduce = v->as_bool();
  if (auto v = f.optional("overlap_param_gather")) m.overlap_param_gather = v->as_bool();
  if (auto v = f.optional("tp_comm_overlap")) m.tp_comm_overlap = v->as_bool();
  if (auto v = f.optional("overlap_p2p_comm")) m.overlap_p2p_comm = v->as_bool();
  if (auto v = f.optional("vocab_parallel")) m.vocab_parallel = v->as_bool();
}

PublishedRun parse_published(const YamlField& f) {
  f.check_keys({"source", "tflops_per_gpu", "iteration_s", "mfu", "note", "table"});
  PublishedRun p;
  p.source = f.child("source").as_string();
  if (auto v = f.optional("tflops_per_gpu")) p.tflops_per_gpu = v->as_positive_double();
  if (auto v = f.optional("iteration_s")) p.iteration_s = v->as_positive_double();
  if (auto v = f.optional("mfu")) p.mfu = v->as_positive_double();
  if (auto v = f.optional("note")) p.note = v->as_string();
  if (auto v = f.optional("table")) {
    p.table = v->as_string();
    // A file beside the config, nothing else: the config reads nothing outside its folder.
    const bool plain = !p.table.empty() && p.table.find('/') == std::string::npos &&
                       p.table.find('\\') == std::string::npos && p.table != "." && p.table != "..";
    if (!plain || p.table.size() < 5 || p.table.compare(p.table.size() - 4, 4, ".csv") != 0)
      v->fail("'" + p.table + "' must be the name of a .csv file in the config's own folder");
  }
  if (p.tflops_per_gpu <= 0 && p.iteration_s <= 0 && p.table.empty())
    f.fail("needs tflops_per_gpu, iteration_s or table (the published figures to compare with)");
  return p;
}

RewardSpec parse_reward(const YamlField& f) {
  f.check_keys({"latency", "memory", "energy", "normalize", "latency_as"});
  RewardSpec r;
  if (auto x = f.optional("latency")) r.latency = x->as_double(0);
  if (auto x = f.optional("memory")) r.memory = x->as_double(0);
  if (auto x = f.optional("energy")) r.energy = x->as_double(0);
  if (auto x = f.optional("normalize")) r.normalize = x->as_bool();
  if (auto x = f.optional("latency_as")) {
    const std::string form = x->as_string();
    if (form != "speedup" && form != "time_saved")
      x->fail("must be speedup or time_saved, not '" + form + "'");
    r.latency_time_saved = form == "time_saved";
    if (r.latency_time_saved && !r.normalize)
      x->fail("time_saved is a form of the normalised reward: needs normalize: true");
  }
  if (r.latency + r.memory + r.energy <= 0) {
    f.fail("at least one of latency, memory, energy needs a weight above 0");
  }
  return r;
}

CatalogOptions parse_catalog_options(const YamlField& f) {
  f.check_keys({"sp", "two_d", "chunks", "recompute", "max_degree", "max_pipeline_stages",
                "uneven_heads"});
  CatalogOptions c;
  if (auto x = f.optional("sp")) c.with_sp = x->as_bool();
  if (auto x = f.optional("two_d")) c.with_2d = x->as_bool();
  if (auto x = f.optional("recompute")) c.with_recompute = x->as_bool();
  if (auto x = f.optional("max_degree")) c.max_degree = x->as_int(0);
  if (auto x = f.optional("max_pipeline_stages")) c.max_pipeline_stages = x->as_int(1);
  // Light-position twins of tp1d entries up to this degree (catalog.h); a degree beyond 64
  // would add thousands of entries.
  if (auto x = f.optional("uneven_heads")) c.uneven_heads_max_degree = x->as_int(0, 64);
  if (auto x = f.optional("chunks")) {
    c.chunks.clear();
    for (size_t i = 0; i < x->size(); ++i) c.chunks.push_back(x->at(i).as_int(1, 64));
    if (c.chunks.empty()) x->fail("needs at least one chunk count (1 = no chunking)");
  }
  return c;
}

LiveSpec parse_live(const YamlField& f) {
  f.check_keys(
      {"ranks", "launch", "corpus", "precision", "timeout_s", "threads_per_rank", "device",
       "backend", "iterations", "warmup_iterations", "extra"});
  LiveSpec l;
  if (auto x = f.optional("ranks")) l.ranks = x->as_int(1, 1024);
  if (auto x = f.optional("launch")) l.launch = x->as_choice({"threads", "processes"});
  if (auto x = f.optional("corpus")) l.corpus = x->as_string();
  if (auto x = f.optional("precision")) {
    l.precision = x->as_choice({"float32", "float64"});  // what the CPU live runtime runs
  }
  // Up to a day: Gloo's timeout is an int of milliseconds.
  if (auto x = f.optional("timeout_s")) l.timeout_s = x->as_double(0.001, 86400);
  if (auto x = f.optional("threads_per_rank")) l.threads_per_rank = x->as_int(1, 256);
  if (auto x = f.optional("iterations")) l.iterations = x->as_int(1, 1000);
  if (auto x = f.optional("warmup_iterations")) l.warmup_iterations = x->as_int(0, 1000);
  if (auto x = f.optional("device")) l.device = x->as_choice({"cpu", "cuda"});
  if (auto x = f.optional("backend")) {
    l.backend = x->as_choice({"gloo", "nccl"});
    if (l.backend == "nccl" && l.device != "cuda") {
      x->fail("nccl needs device: cuda (one rank per GPU)");
    }
  }
  return l;
}

}  // namespace config_detail
}  // namespace shardgym
