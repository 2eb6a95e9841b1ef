#!/bin/bash
# on-policy GRPO: one PPO epoch, one mini-batch per step -> log_prob should equal old_log_prob
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_batch_size=256 \
    actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct \
    actor_rollout_ref.actor.ppo_mini_batch_size=256 \
    actor_rollout_ref.actor.ppo_epochs=1 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.n=8 \
    trainer.n_gpus_per_node=8
# (TaskRunner pid=1234) step:1 - actor/entropy:0.5311 - actor/pg_loss:0.0021 - actor/pg_clipfrac:0.0037 - actor/ppo_kl:0.00041 - actor/pg_clipfrac_lower:0.0002 - actor/grad_norm:0.212
# (TaskRunner pid=1234) step:2 - actor/entropy:0.5287 - actor/pg_loss:-0.0013 - actor/pg_clipfrac:0.0041 - actor/ppo_kl:0.00038 - actor/pg_clipfrac_lower:0.0003 - actor/grad_norm:0.198
