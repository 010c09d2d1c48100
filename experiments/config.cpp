// Top level of the experiment schema: file handling, `include:`, plans, agent and env ids.
#include "experiments/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include "agents/agent.h"
#include "datasets/text/corpus.h"
#include "env/registry.h"
#include "env/share_action.h"
#include "experiments/calibration_file.h"
#include "experiments/config_parts.h"
#include "experiments/yaml_field.h"
#include "runtime/core/catalog.h"

namespace shardgym {
namespace fs = std::filesystem;
using namespace config_detail;

namespace {

std::string compose(const std::string& file, const std::string& key, int line,
                    const std::string& reason) {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line);
  if (!key.empty()) out += (out.empty() ? "" : ": ") + key;
  return out + (out.empty() ? "" : ": ") + reason;
}

// Configs and catalogs are small text files; anything else (a device, a FIFO, a huge file)
// is refused before it is read.
constexpr std::uintmax_t kMaxConfigBytes = 16u << 20;

std::string read_file(const std::string& path, const std::string& error_file,
                      const std::string& error_key, int error_line) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st))
    throw ConfigError(error_file, error_key, error_line,
                      "'" + path + "' is not a regular file (a directory, device or pipe)");
  const std::uintmax_t size = fs::is_regular_file(st) ? fs::file_size(path, ec) : 0;
  if (!ec && size > kMaxConfigBytes)
    throw ConfigError(error_file, error_key, error_line,
                      "'" + path + "' is " + std::to_string(size) + " bytes, above the " +
                          std::to_string(kMaxConfigBytes) + " a config may have");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(error_file, error_key, error_line,
                      "cannot read '" + path + "': " + std::generic_category().message(errno));
  }
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

YAML::Node parse_yaml(const std::string& text, const std::string& file) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(file, "", e.mark.is_null() ? 0 : e.mark.line + 1, "YAML syntax: " + e.msg);
  }
}

// Lines of an included file, commented out, so that the stored config text stays valid YAML
// and still says which hardware figures were used.
std::string commented(const std::string& name, const std::string& text) {
  std::ostringstream os;
  os << "\n# ---- included " << name << " ----\n";
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) os << "# " << line << "\n";
  return os.str();
}

// Included files recorded in a config's text (the commented copies `commented` appends): a
// trace's config is rebuilt from these, never from disk.
using Embedded = std::map<std::string, std::string>;

Embedded embedded_files(const std::string& text) {
  static const std::string kHead = "# ---- included ";
  static const std::string kTail = " ----";
  Embedded files;
  std::istringstream in(text);
  std::string* current = nullptr;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kHead, 0) == 0 && line.size() > kHead.size() + kTail.size() &&
        line.compare(line.size() - kTail.size(), kTail.size(), kTail) == 0) {
      const std::string name = line.substr(kHead.size(), line.size() - kHead.size() - kTail.size());
      current = files.count(name) ? nullptr : &files[name];  // the first copy counts
      continue;
    }
    if (!current) continue;
    if (line.rfind("#", 0) != 0) {  // past the copy: the rest is not part of it
      current = nullptr;
      continue;
    }
    *current += (line.size() >= 2 ? line.substr(2) : std::string()) + "\n";
  }
  return files;
}

// The file an include or calibration names: from disk, or from `embedded` (recorded configs).
std::string read_named(const std::string& name, const std::string& path, const Embedded* embedded,
                       const std::string& error_file, const std::string& error_key,
                       int error_line) {
  if (!embedded) return read_file(path, error_file, error_key, error_line);
  const auto it = embedded->find(name);
  if (it == embedded->end()) {
    throw ConfigError(error_file, error_key, error_line,
                      "'" + name +
                          "' is not recorded in the config's text (a recorded config "
                          "reads no file)");
  }
  return it->second;
}

CatalogSource read_includes(const YamlField& include, const std::string& base_dir, DType dtype,
                            std::string& source_text, const Embedded* embedded) {
  CatalogSource catalogs;
  std::vector<YamlField> entries;
  if (include.is_sequence()) {
    for (size_t i = 0; i < include.size(); ++i) entries.push_back(include.at(i));
  } else {
    entries.push_back(include);
  }
  for (const YamlField& entry : entries) {
    const std::string name = entry.as_string();
    const std::string path = (fs::path(base_dir) / name).lexically_normal().string();
    const std::string text =
        read_named(name, path, embedded, entry.file(), entry.path(), entry.line());
    const YAML::Node doc = parse_yaml(text, path);
    // An include may name any file (`include: /etc/shadow`): until its top level is seen to be
    // a hardware file, errors name the file but quote none of its content
    // (docs/robustness.md, "Information and messages").
    bool hardware = doc.IsMap();
    for (auto it = doc.begin(); hardware && it != doc.end(); ++it)
      hardware = it->first.IsScalar() &&
                 (it->first.Scalar() == "devices" || it->first.Scalar() == "links");
    if (!hardware) {
      const std::string found =
          doc.IsScalar() ? "plain text of " + std::to_string(doc.Scalar().size()) + " characters"
          : doc.IsMap()  ? "a mapping with other keys"
                         : "not a mapping";
      throw ConfigError(entry.file(), entry.path(), entry.line(),
                        "'" + path + "' is not a hardware file (" + found +
                            "): its top level must be a mapping with only the keys devices and "
                            "links; its content is not shown");
    }
    YamlField root(doc, path, "", 1);
    root.check_keys({"devices", "links"});
    parse_hardware(root, dtype, catalogs);
    source_text += commented(name, text);
  }
  return catalogs;
}

Plan check_plan(const YamlField& field, const std::string& text, const ModelSpec& model,
                const ClusterSpec& cluster) {
  Plan plan;
  try {
    plan = resolve_plan(text, model, cluster);
  } catch (const std::invalid_argument& e) {
    field.fail(std::string("bad plan: ") + e.what());
  }
  if (plan.size() != model.num_blocks()) {
    field.fail("the plan has " + std::to_string(plan.size()) + " blocks; the model has " +
               std::to_string(model.num_blocks()) + " (2 per layer)");
  }
  std::string problem = plan.validate(model, cluster.world_size());
  if (!problem.empty()) {
    field.fail("plan not valid for this model on " + std::to_string(cluster.world_size()) +
               " GPUs: " + problem);
  }
  return plan;
}

// live.corpus is read here, at load, as every rank would read it (text::TextCorpus::load:
// a regular text file of bounded size), and both splits must hold one window of the model's
// sequence (seq + 1 tokens): a rank used to find out when it started.
void check_corpus(const YamlField& field, const ExperimentSpec& spec) {
  try {
    const text::TextCorpus corpus = text::TextCorpus::load({spec.live.corpus});
    for (text::Split split : {text::Split::kTrain, text::Split::kValidation}) {
      const size_t need = static_cast<size_t>(spec.model.seq) + 1;
      if (corpus.num_tokens(split) < need)
        field.fail("'" + spec.live.corpus + "': its " + text::split_name(split) + " split has " +
                   std::to_string(corpus.num_tokens(split)) + " tokens, fewer than one window of " +
                   std::to_string(need) + " (model.seq + 1)");
    }
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    field.fail(e.what());
  }
}

// Every block kind must have at least one shape-valid catalog entry: otherwise every action
// is masked and the run could only fail at its first step.
void check_catalog(const YamlField& field, const ExperimentSpec& spec) {
  const int world = spec.cluster.world_size();
  const StrategyCatalog catalog(spec.model, world, spec.catalog);
  for (BlockKind kind : {BlockKind::kAttention, BlockKind::kMlp}) {
    const auto& mask = catalog.shape_mask(kind);
    if (std::find(mask.begin(), mask.end(), 1) != mask.end()) continue;
    field.fail("no catalog entry is valid for the " +
               std::string(kind == BlockKind::kAttention ? "attention" : "MLP") +
               " blocks of this model on " + std::to_string(world) + " GPUs, so every action " +
               "would be masked (first of " + std::to_string(catalog.size()) + ": " +
               (catalog.size() > 0 ? catalog.why_invalid(kind, 0) : std::string("none")) +
               "); allow more entries, e.g. chunks: [1]");
  }
}

AgentSpec parse_agent(const YamlField& f, const ModelSpec& model, const ClusterSpec& cluster) {
  f.check_keys({"id", "plan", "checkpoint", "train_steps"});
  AgentSpec a;
  if (auto id = f.optional("id")) {
    a.id = id->as_string();
    std::string name;
    try {
      name = ParsedId::parse(a.id).name;
    } catch (const std::invalid_argument& e) {
      id->fail(std::string("bad agent id: ") + e.what());
    }
    std::vector<std::string> known = registered_agent_names();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string hint = closest_name(name, known);
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      id->fail("unknown agent '" + name + "' (registered: " + list + ")" +
               (hint.empty() ? std::string() : "; did you mean '" + hint + "'?"));
    }
    try {
      check_agent_id(a.id);  // its parameters: keys, numbers, ranges
    } catch (const std::invalid_argument& e) {
      id->fail(e.what());
    }
  }
  if (auto plan = f.optional("plan")) {
    a.plan = plan->as_string();
    // "atp" (searched by the agent on the run) and "dp" (always shape-valid) are names the
    // static agents resolve themselves; everything else must be a valid plan here.
    if (a.plan != "atp" && a.plan != "dp") check_plan(*plan, a.plan, model, cluster);
  }
  if (auto ckpt = f.optional("checkpoint")) a.checkpoint = ckpt->as_string();
  if (auto steps = f.optional("train_steps")) a.train_steps = steps->as_int(0);
  return a;
}

std::string check_env_id(const YamlField& f) {
  std::string id = f.as_string();
  if (env_registered(id)) return id;
  std::vector<std::string> known = registered_env_ids();
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  std::string hint = closest_name(id, known);
  f.fail("unknown env '" + id + "' (registered: " + list + ")" +
         (hint.empty() ? std::string() : "; did you mean '" + hint + "'?"));
}

}  // namespace

ConfigError::ConfigError(std::string file, std::string key, int line, std::string reason)
    : std::runtime_error(compose(file, key, line, reason)),
      file_(std::move(file)),
      key_(std::move(key)),
      reason_(std::move(reason)),
      line_(line) {}

std::string closest_name(const std::string& name, const std::vector<std::string>& known) {
  // Optimal-string-alignment distance (a swap of two neighbours counts as one edit).
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
    for (size_t i = 1; i <= a.size(); ++i) {
      for (size_t j = 1; j <= b.size(); ++j) {
        int cost = std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.size()][b.size()];
  };
  std::string best;
  int best_d = 1 << 30;
  for (const auto& k : known) {
    int dist = distance(name, k);
    if (dist < best_d) best_d = dist, best = k;
  }
  const int limit = std::max<int>(2, static_cast<int>(name.size()) / 3);
  return best_d <= limit ? best : std::string();
}

HardwareCatalog load_hardware_catalog(const std::string& path, DType dtype) {
  const std::string text = read_file(path, path, "", 0);
  YamlField root(parse_yaml(text, path), path, "", 1);
  root.check_keys({"devices", "links"});
  CatalogSource source;
  parse_hardware(root, dtype, source);
  return source.catalog;
}

namespace {

// The run's name: the file's stem, or `name:`, which becomes runs/<name>/: one plain path
// component, nothing that leaves runs/.
std::string run_name(const YamlField& root, const std::string& file) {
  std::string out = fs::path(file).stem().string();
  if (auto name = root.optional("name")) {
    out = name->as_string();
    const bool plain =
        !out.empty() && out != "." && out != ".." &&
        std::all_of(out.begin(), out.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
        });
    if (!plain)
      name->fail("'" + out +
                 "' is not a plain run name (letters, digits, '-', '_', '.'); "
                 "it becomes the folder runs/<name>/");
  }
  return out;
}

// `cluster.calibration: FILE`, relative to the config file like `include:`: read, checked
// against the cluster and applied to it; its text goes into the spec's source text.
void apply_calibration_key(const YamlField& cal, const std::string& base_dir,
                           const Embedded* embedded, ExperimentSpec& spec) {
  const fs::path given(cal.as_string());
  const std::string path =
      given.is_absolute() ? given.string() : (fs::path(base_dir) / given).string();
  CalibrationFile file;
  try {
    const std::string text =
        read_named("calibration " + cal.as_string(), path, embedded, path, "", 0);
    file = parse_calibration_file(text, path);
    spec.source_text += commented("calibration " + cal.as_string(), text);
  } catch (const ConfigError& e) {
    cal.fail("calibration file: " + std::string(e.what()));
  }
  const std::string why = apply_calibration(file, path, spec.cluster);
  if (!why.empty()) cal.fail("'" + path + "' does not fit this cluster: " + why);
}

// `replay_trace: FILE`, relative to the config file like `include:`; it must exist before
// anything runs. The error_code form: the throwing one let a filesystem_error (a name too
// long for the OS, found by fuzz/config_fuzz) escape instead of a ConfigError.
std::string replay_trace_path(const YamlField& trace, const std::string& base_dir) {
  const fs::path path = fs::path(base_dir) / trace.as_string();
  const std::string out = path.lexically_normal().string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    trace.fail("no trace file at '" + out + "'" + (ec ? " (" + ec.message() + ")" : std::string()));
  return out;
}

ExperimentSpec parse_impl(const std::string& text, const std::string& file,
                          const std::string& base_dir, const Embedded* embedded) {
  YamlField root(parse_yaml(text, file), file, "", 1);
  if (!root.node().IsDefined() || root.node().IsNull()) root.fail("the file is empty");
  const std::vector<std::string> keys = {
      "name",    "env",          "include",      "model",    "cluster",   "scenario",
      "reward",  "agent",        "catalog",      "live",     "episodes",  "steps_per_episode",
      "seeds",   "initial_plan", "replay_trace", "training", "published", "data_shares",
      "instance"};
  root.check_keys(keys);
  ExperimentSpec spec;
  spec.source_path = file;
  spec.source_text = text;
  for (const std::string& key : keys) {
    if (auto f = root.optional(key)) spec.key_lines[key] = f->line();
  }
  spec.name = run_name(root, file);
  if (auto env = root.optional("env")) spec.env_id = check_env_id(*env);

  spec.model = parse_model(root.child("model"));
  if (auto t = root.optional("training")) parse_training(*t, spec.model);
  if (auto p = root.optional("published")) spec.published = parse_published(*p);
  CatalogSource included;
  if (auto include = root.optional("include")) {
    included = read_includes(*include, base_dir, spec.model.dtype, spec.source_text, embedded);
  }
  spec.cluster = parse_cluster(root.child("cluster"), spec.model.dtype, included);
  if (spec.cluster.name.empty()) spec.cluster.name = spec.name;
  if (auto cal = root.child("cluster").optional("calibration"))
    apply_calibration_key(*cal, base_dir, embedded, spec);
  if (auto s = root.optional("scenario")) spec.scenario = parse_scenario(*s, spec.cluster);
  // Which instance of the scenario's draws to run (with_instance; `compare` and `suite` set
  // it per seed). Without draws it changes nothing.
  if (auto i = root.optional("instance"))
    spec.scenario.instance = static_cast<uint64_t>(i->as_int(0));
  if (auto r = root.optional("reward")) spec.reward = parse_reward(*r);
  if (auto c = root.optional("catalog")) spec.catalog = parse_catalog_options(*c);
  check_catalog(root.optional("catalog").value_or(root), spec);
  if (auto l = root.optional("live")) {
    // The live ranks run their own layers: the simulator of this config prices their memory.
    if (auto impl = root.child("model").optional("implementation");
        impl && impl->as_string() != "live")
      impl->fail("a config with a live section runs the live layers (implementation: live)");
    spec.model.live_layers = true;
    spec.live = parse_live(*l);
    if (!spec.live.corpus.empty()) check_corpus(*l->optional("corpus"), spec);
    if (auto extra = l->optional("extra")) parse_env_options(*extra, "live.extra", base_dir, spec);
  }
  if (auto a = root.optional("agent")) spec.agent = parse_agent(*a, spec.model, spec.cluster);
  if (auto trace = root.optional("replay_trace"))
    spec.replay_trace = replay_trace_path(*trace, base_dir);
  const std::optional<YamlField> plan_field = root.optional("initial_plan");
  if (plan_field) spec.initial_plan = plan_field->as_string();
  check_plan(plan_field ? *plan_field : root, spec.initial_plan, spec.model, spec.cluster);
  if (auto d = root.optional("data_shares")) {
    // The data-share action (env/share_action.h): n share groups per pipeline stage.
    d->check_keys({"groups"});
    YamlField g = d->child("groups");
    spec.data_share_groups = g.as_int(1, kMaxShareActionGroups);
    if (spec.cluster.world_size() % spec.data_share_groups != 0)
      g.fail(std::to_string(spec.data_share_groups) + " share groups do not split the world of " +
             std::to_string(spec.cluster.world_size()) + " ranks");
  }
  if (auto e = root.optional("episodes")) spec.episodes = e->as_int(1);
  if (auto s = root.optional("steps_per_episode")) spec.steps_per_episode = s->as_int(1);
  if (auto seeds = root.optional("seeds")) {
    spec.seeds.clear();
    if (seeds->is_sequence()) {
      for (size_t i = 0; i < seeds->size(); ++i) spec.seeds.push_back(seeds->at(i).as_int(0));
    } else {
      spec.seeds.push_back(seeds->as_int(0));
    }
    if (spec.seeds.empty()) seeds->fail("needs at least one seed");
  }
  validate_env(root, spec);  // the env's own options and checks (its registration)
  return spec;
}

}  // namespace

ExperimentSpec parse_experiment(const std::string& text, const std::string& file,
                                const std::string& base_dir) {
  return parse_impl(text, file, base_dir, nullptr);
}

ExperimentSpec parse_recorded_experiment(const std::string& text, const std::string& file,
                                         const std::string& base_dir) {
  const Embedded embedded = embedded_files(text);
  return parse_impl(text, file, base_dir, &embedded);
}

namespace config_detail {
std::string read_config_text(const std::string& path, const std::string& error_file,
                             const std::string& error_key, int error_line) {
  return read_file(path, error_file, error_key, error_line);
}
YAML::Node parse_yaml_text(const std::string& text, const std::string& file) {
  return parse_yaml(text, file);
}
}  // namespace config_detail

ExperimentSpec load_experiment(const std::string& path) {
  const std::string text = read_file(path, path, "", 0);
  std::string base = fs::path(path).parent_path().string();
  return parse_experiment(text, path, base.empty() ? "." : base);
}

}  // namespace shardgym
