"""PPO with invalid-action masking, CleanRL-style (one file), on ShardGym's vector env.

    .venv/bin/python examples/python/cleanrl_ppo.py [--config experiments/quickstart.yaml]

Envs: shardgym.vector.make(...) (N envs stepped on C++ threads, autoreset), masks from
info["action_mask_flat"]. The action is one catalog index per block (MultiDiscrete([K] * B)); the
policy is a Categorical per block whose masked choices get the logit -1e8, so they are never
sampled and carry no probability in the log-probability and entropy (CleanRL's
ppo_multidiscrete_mask does the same). Every `--eval-every` env steps a greedy episode
(masked argmax per block) is played on `--eval-seed`; training stops when its return reaches
`--target` x the C++ `oracle` agent's return on the same seed (shardgym.run_agent), or at
`--total-timesteps`. Prints one JSON line per evaluation and a final one with the steps, the
wall time and the ratio.

Two choices that differ from CleanRL's ppo.py, both measured on the quickstart (see
docs/python.md): the actor is shared by the blocks (one MLP reads a block's kind, its
position and the step's global conditions, and outputs that block's K logits), and gamma is
0 by default (the repartition a plan change costs is charged to the same step).
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn as nn

import shardgym
import shardgym.vector

MASKED_LOGIT = -1e8  # a masked choice's logit: exp() underflows to exactly 0 probability


class HelpFormatter(argparse.RawDescriptionHelpFormatter,
                    argparse.ArgumentDefaultsHelpFormatter):
    """--help: the module docstring as written, each flag with its default."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=HelpFormatter)
    b = argparse.BooleanOptionalAction
    # CleanRL's names and meanings (ppo.py); defaults are this example's, tuned on the quickstart.
    p.add_argument("--exp-name", default="cleanrl_ppo", help="name printed with the results")
    p.add_argument("--seed", type=int, default=0, help="seed of torch and of the training envs")
    p.add_argument("--torch-deterministic", action=b, default=True,
                   help="torch.use_deterministic_algorithms")
    p.add_argument("--env-id", default="shardgym/TPSim-v0", help="registered ShardGym env")
    p.add_argument("--total-timesteps", type=int, default=300_000,
                   help="env steps budget (summed over envs)")
    p.add_argument("--learning-rate", type=float, default=3e-3, help="Adam's learning rate")
    p.add_argument("--num-envs", type=int, default=8, help="envs of the vector env")
    p.add_argument("--num-steps", type=int, default=64, help="rollout length per env")
    p.add_argument("--anneal-lr", action=b, default=False,
                   help="anneal the learning rate linearly to 0 over --total-timesteps")
    # 0: a step's reward is credited to that step's plan only (see the module docstring).
    p.add_argument("--gamma", type=float, default=0.0, help="discount factor")
    p.add_argument("--gae-lambda", type=float, default=0.95, help="lambda of GAE")
    p.add_argument("--num-minibatches", type=int, default=4, help="minibatches per epoch")
    p.add_argument("--update-epochs", type=int, default=4, help="epochs per update")
    p.add_argument("--norm-adv", action=b, default=True, help="normalise advantages")
    p.add_argument("--clip-coef", type=float, default=0.2, help="surrogate clipping coefficient")
    p.add_argument("--clip-vloss", action=b, default=True, help="clipped value loss")
    p.add_argument("--ent-coef", type=float, default=0.01, help="entropy coefficient")
    p.add_argument("--vf-coef", type=float, default=0.5, help="value loss coefficient")
    p.add_argument("--max-grad-norm", type=float, default=0.5, help="gradient norm clipping")
    p.add_argument("--target-kl", type=float, default=None,
                   help="stop an update's epochs when the approximate KL exceeds this")
    # ShardGym's own.
    p.add_argument("--config", default="experiments/quickstart.yaml", help="experiment YAML")
    p.add_argument("--target", type=float, default=0.95,
                   help="stop when the greedy return reaches this fraction of the oracle's")
    p.add_argument("--eval-every", type=int, default=2048,
                   help="env steps between greedy evaluations")
    p.add_argument("--eval-seed", type=int, default=shardgym.HELD_OUT_SEED,
                   help="seed of the evaluation episode (default 2^31: no training env's seed)")
    p.add_argument("--hidden", type=int, default=64, help="width of the actor and critic MLPs")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--env-threads", type=int, default=1, help="C++ threads of the vector env")
    p.add_argument("--quiet", action="store_true", help="print the final JSON line only")
    args = p.parse_args(argv)
    for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs",
                 "eval_every", "hidden", "threads", "env_threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if not 0 <= args.gamma <= 1 or not 0 <= args.gae_lambda <= 1:
        p.error("--gamma and --gae-lambda must be in [0, 1]")
    args.batch_size = args.num_envs * args.num_steps
    if args.batch_size % args.num_minibatches:
        p.error(f"--num-minibatches ({args.num_minibatches}) must divide num-envs x num-steps "
                f"({args.batch_size})")
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = -(-args.total_timesteps // args.batch_size)
    return args


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def step_features(obs):
    """The step's conditions: the `global` and `links` parts, (N, G)."""
    return torch.cat([torch.as_tensor(obs["global"]), torch.as_tensor(obs["links"])], dim=1)


class Agent(nn.Module):
    """Actor shared by the blocks: block b's logits = MLP(kind of b, b / B, step features).
    Critic: MLP(step features). Blocks 2i and 2i + 1 are layer i's attention and MLP
    (docs/python.md, Spaces)."""

    def __init__(self, num_blocks, catalog_size, step_dim, hidden):
        super().__init__()
        b = torch.arange(num_blocks)
        # (B, 3): is attention, is MLP, relative position.
        self.register_buffer("block_feats", torch.stack(
            [(b % 2 == 0).float(), (b % 2 == 1).float(), b.float() / num_blocks], dim=1))
        self.num_blocks, self.catalog_size = num_blocks, catalog_size
        self.critic = nn.Sequential(
            layer_init(nn.Linear(step_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, 1), std=1.0))
        self.actor = nn.Sequential(
            layer_init(nn.Linear(3 + step_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, catalog_size), std=0.01))

    def get_value(self, x):
        return self.critic(x)

    def masked_logits(self, x, mask):
        """x (N, G), mask (N, B, K) bool -> logits (N, B, K), masked ones MASKED_LOGIT."""
        n = x.shape[0]
        inp = torch.cat([self.block_feats.expand(n, -1, -1),
                         x.unsqueeze(1).expand(-1, self.num_blocks, -1)], dim=2)
        logits = self.actor(inp)
        return torch.where(mask, logits, torch.tensor(MASKED_LOGIT))

    def get_action_and_value(self, x, mask, action=None):
        logits = self.masked_logits(x, mask)
        dist = torch.distributions.Categorical(logits=logits)  # batch shape (N, B)
        if action is None:
            action = dist.sample()
        # Entropy over the allowed choices only (a masked p log p is 0 * -1e8 = -0 anyway,
        # but say it): per block, summed over blocks as CleanRL's MultiDiscrete does.
        p_log_p = torch.where(mask, dist.probs * dist.logits, torch.tensor(0.0))
        entropy = -p_log_p.sum(-1).sum(-1)
        return action, dist.log_prob(action).sum(-1), entropy, self.critic(x)

    def greedy(self, x, mask):
        return self.masked_logits(x, mask).argmax(-1)


def split_mask(info, num_envs, num_blocks, catalog_size):
    mask = np.array(info["action_mask_flat"])  # a copy: the vector env's is read-only
    return torch.as_tensor(mask).view(num_envs, num_blocks, catalog_size)


def evaluate(agent, env, seed):
    """Return of one greedy episode of the evaluation env (a one-env vector env), the plan of
    its last step (catalog indices) and the episode's env steps."""
    obs, info = env.reset(seed=seed)
    total, steps = 0.0, 0
    with torch.no_grad():
        while True:
            mask = split_mask(info, 1, agent.num_blocks, agent.catalog_size)
            action = agent.greedy(step_features(obs), mask).numpy().astype(np.int32)
            obs, reward, terminated, truncated, info = env.step(action)
            total += float(reward[0])
            steps += 1
            if terminated[0] or truncated[0]:
                return total, action[0], steps


def plan_text(plan, catalog):
    """Catalog indices as "n*strategy;..." runs, as the C++ plan text abbreviates them."""
    runs = []
    for k in plan:
        if runs and runs[-1][0] == k:
            runs[-1][1] += 1
        else:
            runs.append([k, 1])
    return ";".join((f"{n}*" if n > 1 else "") + catalog[k] for k, n in runs)


def train(args, log=print):
    """Trains until the target or the budget; returns the final result as a dict."""
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.use_deterministic_algorithms(args.torch_deterministic)
    torch.set_num_threads(args.threads)

    oracle = shardgym.run_agent("oracle", args.config, seed=args.eval_seed)["return"]
    if oracle <= 0:
        raise ValueError(f"the oracle's return on {args.config} is {oracle}; the ratio to it "
                         "needs a positive one (normalised rewards)")
    log(json.dumps({"exp_name": args.exp_name, "config": args.config,
                    "oracle_return": round(oracle, 3)}))
    envs = shardgym.vector.make(args.env_id, num_envs=args.num_envs, config=args.config,
                                threads=args.env_threads)
    eval_env = shardgym.vector.make(args.env_id, num_envs=1, config=args.config, threads=1)
    num_blocks, catalog_size = len(envs.action_nvec), envs.catalog_size
    if not np.all(envs.action_nvec == catalog_size):
        raise ValueError(f"{args.config}: the action has a pipeline component "
                         f"(nvec {envs.action_nvec.tolist()}); this example handles "
                         "one catalog index per block only")

    obs, info = envs.reset(seed=args.seed)
    next_x = step_features(obs)
    next_mask = split_mask(info, args.num_envs, num_blocks, catalog_size)
    agent = Agent(num_blocks, catalog_size, next_x.shape[1], args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    n, t_len = args.num_envs, args.num_steps
    xs = torch.zeros((t_len, n, next_x.shape[1]))
    masks = torch.zeros((t_len, n, num_blocks, catalog_size), dtype=torch.bool)
    actions = torch.zeros((t_len, n, num_blocks), dtype=torch.long)
    logprobs, rewards, dones, values = (torch.zeros((t_len, n)) for _ in range(4))
    next_done = torch.zeros(n)

    start = time.time()
    global_step, next_eval, best = 0, args.eval_every, None
    eval_steps = 0  # of the greedy evaluations: they pick when to stop, so they count
    curve = []

    def record(ret, **extra):
        nonlocal best
        wall = time.time() - start
        row = {"global_step": global_step, "env_steps": global_step + eval_steps,
               "wall_s": round(wall, 2),
               "sps": int(global_step / wall) if wall > 0 else 0,  # CleanRL's SPS
               "return": round(ret, 3), "ratio": round(ret / oracle, 4), **extra}
        log(json.dumps(row))
        curve.append(row)
        if best is None or row["ratio"] > best["ratio"]:
            best = row
        return ret / oracle

    # The untrained policy, for comparison.
    ret, plan, n_eval = evaluate(agent, eval_env, args.eval_seed)
    eval_steps += n_eval
    ratio = record(ret)
    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(t_len):
            global_step += n
            xs[step], masks[step], dones[step] = next_x, next_mask, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_x, next_mask)
            values[step], actions[step], logprobs[step] = value.flatten(), action, logprob
            obs, reward, terminated, truncated, info = envs.step(action.numpy().astype(np.int32))
            reward = torch.as_tensor(reward, dtype=torch.float32)
            # A truncated episode (the time limit) is bootstrapped from its last observation's
            # value, which the autoreset keeps in info["final_obs"]. A failed step (an error,
            # out of memory) is truncated too and is not: nothing follows it.
            cut = truncated & ~terminated & (np.asarray(info["error"]) == "")
            if args.gamma > 0 and cut.any():
                with torch.no_grad():
                    final_v = agent.get_value(step_features(info["final_obs"])).flatten()
                reward += args.gamma * final_v * torch.as_tensor(cut, dtype=torch.float32)
            rewards[step] = reward
            next_x = step_features(obs)
            next_mask = split_mask(info, n, num_blocks, catalog_size)
            next_done = torch.as_tensor(terminated | truncated, dtype=torch.float32)

        with torch.no_grad():  # GAE, as CleanRL's ppo.py
            next_value = agent.get_value(next_x).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(t_len)):
                nextnonterminal = 1.0 - (next_done if t == t_len - 1 else dones[t + 1])
                nextvalues = next_value if t == t_len - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = (
                    delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam)
            returns = advantages + values

        b_x, b_masks = xs.reshape(-1, xs.shape[-1]), masks.reshape(-1, num_blocks, catalog_size)
        b_actions, b_logprobs = actions.reshape(-1, num_blocks), logprobs.reshape(-1)
        b_advantages, b_returns, b_values = (
            advantages.reshape(-1), returns.reshape(-1), values.reshape(-1))
        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for begin in range(0, args.batch_size, args.minibatch_size):
                mb = b_inds[begin:begin + args.minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_x[mb], b_masks[mb], b_actions[mb])
                logratio = newlogprob - b_logprobs[mb]
                ratio_t = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio_t - 1) - logratio).mean()
                    clipfracs.append(((ratio_t - 1.0).abs() > args.clip_coef).float().mean().item())
                mb_adv = b_advantages[mb]
                if args.norm_adv:
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(
                    -mb_adv * ratio_t,
                    -mb_adv * torch.clamp(ratio_t, 1 - args.clip_coef, 1 + args.clip_coef)).mean()
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_unclipped = (newvalue - b_returns[mb]) ** 2
                    v_clipped = b_values[mb] + torch.clamp(
                        newvalue - b_values[mb], -args.clip_coef, args.clip_coef)
                    v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b_returns[mb]) ** 2).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        if global_step >= next_eval or iteration == args.num_iterations:
            next_eval += args.eval_every
            ret, plan, n_eval = evaluate(agent, eval_env, args.eval_seed)
            eval_steps += n_eval
            ratio = record(ret, train_reward_per_step=round(float(rewards.mean()), 4),
                           entropy=round(float(entropy.mean()), 3),
                           approx_kl=round(float(approx_kl), 5),
                           clipfrac=round(float(np.mean(clipfracs)), 3))
            if ratio >= args.target:
                break
    catalog = envs.env_spec["catalog"]
    envs.close()
    eval_env.close()
    return {"exp_name": args.exp_name, "result": "reached" if ratio >= args.target
            else "not reached", "target": args.target, "steps": global_step,
            "eval_steps": eval_steps, "env_steps": global_step + eval_steps,
            "wall_s": round(time.time() - start, 2), "return": round(ret, 3),
            "oracle_return": round(oracle, 3), "ratio": round(ratio, 4), "best": best,
            "curve": curve, "final_plan": plan_text(plan, catalog)}


def main():
    args = parse_args()
    result = train(args, log=(lambda _: None) if args.quiet else
                   (lambda line: print(line, flush=True)))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
