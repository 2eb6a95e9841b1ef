set -x
# OpenRLHF GRPO (group_norm advantages) with the hybrid engine on one 8-GPU node.
# cluster: 1 node x 8 GPUs

ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json='{"working_dir": "/openrlhf"}' \
   -- python3 -m openrlhf.cli.train_ppo_ray \
   --ref_num_nodes 1 \
   --ref_num_gpus_per_node 8 \
   --actor_num_nodes 1 \
   --actor_num_gpus_per_node 8 \
   --vllm_num_engines 4 \
   --vllm_tensor_parallel_size 2 \
   --colocate_all_models \
   --vllm_gpu_memory_utilization 0.6 \
   --vllm_enable_sleep \
   --deepspeed_enable_sleep \
   --pretrain Qwen/Qwen2.5-7B-Instruct \
   --remote_rm_url /openrlhf/examples/scripts/reward_func.py \
   --save_path /openrlhf/examples/checkpoint/qwen2.5-7b-grpo \
   --micro_train_batch_size 4 \
   --train_batch_size 128 \
   --micro_rollout_batch_size 8 \
   --rollout_batch_size 128 \
   --n_samples_per_prompt 2 \
   --advantage_estimator group_norm \
   --max_samples 100000 \
   --max_epochs 1 \
   --prompt_max_len 1024 \
   --generate_max_len 2048 \
   --zero_stage 3 \
   --bf16 \
   --max_norm 0 \
   --actor_learning_rate 5e-7 \
   --init_kl_coef 1e-3 \
   --use_kl_loss \
   --kl_estimator k3 \
   --prompt_data OpenRLHF/prompt-collection-v0.1 \
   --input_key context_messages \
   --apply_chat_template \
   --packing_samples \
   --flash_attn \
   --gradient_checkpointing \
   --lora_rank 64 \
   --lora_alpha 128 \
   --target_modules all-linear
