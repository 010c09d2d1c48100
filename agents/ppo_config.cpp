// PPOConfig::from_id, apart from the LibTorch code so that builds without LibTorch check PPO's
// parameters at config load too.
#include <cmath>
#include <stdexcept>

#include "agents/ppo.h"

namespace shardgym {

PPOConfig PPOConfig::from_id(const ParsedId& id) {
  id.check_keys({"lr",     "rollout",     "epochs", "minibatches",   "gamma",    "lambda",
                 "clip",   "ent",         "vf",     "max_grad_norm", "norm_adv", "clip_vloss",
                 "hidden", "fail_reward", "ratio",  "keep",          "keep_p",   "decode",
                 "margin", "plan",        "plan_p", "plan_lr",
                 "restart_s", "polish", "polish_gain", "norm_reward"});
  PPOConfig c;
  c.lr = id.get("lr", c.lr);
  c.rollout = static_cast<int>(id.get("rollout", static_cast<double>(c.rollout)));
  c.epochs = static_cast<int>(id.get("epochs", static_cast<double>(c.epochs)));
  c.minibatches = static_cast<int>(id.get("minibatches", static_cast<double>(c.minibatches)));
  c.gamma = id.get("gamma", c.gamma);
  c.lambda = id.get("lambda", c.lambda);
  c.clip = id.get("clip", c.clip);
  c.ent_coef = id.get("ent", c.ent_coef);
  c.vf_coef = id.get("vf", c.vf_coef);
  c.max_grad_norm = id.get("max_grad_norm", c.max_grad_norm);
  c.norm_adv = id.get("norm_adv", 1.0) != 0;
  c.clip_vloss = id.get("clip_vloss", 1.0) != 0;
  c.norm_reward = id.get("norm_reward", c.norm_reward ? 1.0 : 0.0) != 0;
  c.hidden = static_cast<int>(id.get("hidden", static_cast<double>(c.hidden)));
  c.fail_reward = id.get("fail_reward", c.fail_reward);
  c.keep = id.get("keep", 1.0) != 0;
  c.keep_p = id.get("keep_p", c.keep_p);
  c.margin = id.get("margin", c.margin);
  if (id.get("plan", std::string()) == "alt")
    c.plan_alt = true;
  else
    c.plan = id.get("plan", c.plan ? 1.0 : 0.0) != 0;
  c.plan_p = id.get("plan_p", c.plan_p);
  c.plan_lr = id.get("plan_lr", c.plan_lr);
  c.restart_s = id.get("restart_s", c.restart_s);
  const double polish = id.get("polish", static_cast<double>(c.polish));
  c.polish_gain = id.get("polish_gain", c.polish_gain);
  auto bad = [&](const std::string& what) { throw std::invalid_argument(id.name + ": " + what); };
  const std::string ratio = id.get("ratio", std::string("block"));
  if (ratio != "block" && ratio != "joint")
    bad("ratio must be block or joint, not '" + ratio + "'");
  c.block_ratio = ratio == "block";
  const std::string decode = id.get("decode", std::string("pref"));
  if (decode != "mode" && decode != "pref")
    bad("decode must be mode or pref, not '" + decode + "'");
  c.decode_pref = decode == "pref";
  if (!(c.margin >= 0)) bad("margin must be >= 0");
  if (!(c.lr > 0) || !(c.plan_lr > 0)) bad("lr and plan_lr must be > 0");
  if (c.rollout < 1 || c.epochs < 1 || c.minibatches < 1 || c.hidden < 1)
    bad("rollout, epochs, minibatches and hidden must be >= 1");
  if (c.minibatches > c.rollout) bad("minibatches must not exceed rollout");
  if (!(c.gamma >= 0 && c.gamma <= 1) || !(c.lambda >= 0 && c.lambda <= 1))
    bad("gamma and lambda must lie in [0, 1]");
  if (!(c.clip > 0) || !(c.max_grad_norm > 0)) bad("clip and max_grad_norm must be > 0");
  if (!(c.keep_p > 0 && c.keep_p < 1)) bad("keep_p must lie in (0, 1)");
  if (!(c.plan_p > 0 && c.plan_p < 1)) bad("plan_p must lie in (0, 1)");
  if (!(c.restart_s >= 0) || !std::isfinite(c.restart_s))
    bad("restart_s must be a finite number of seconds >= 0 (0: no restarts)");
  if (c.plan_alt && c.restart_s == 0)
    bad("plan=alt alternates plan rows across restarts on stall: set restart_s > 0");
  if (!(polish >= 0 && polish <= 1e6) || polish != std::floor(polish))
    bad("polish must be a whole number of updates >= 0 (0: no polish)");
  c.polish = static_cast<int>(polish);
  if (!(c.polish_gain >= 0 && c.polish_gain < 1)) bad("polish_gain must lie in [0, 1)");
  return c;
}

}  // namespace shardgym
