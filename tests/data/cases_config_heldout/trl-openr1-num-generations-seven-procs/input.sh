#!/bin/bash
# open-r1 GRPO (trl 0.15.0.dev0), 1 node x 8 GPUs: GPU 7 is reserved for vLLM generation,
# so training runs on the remaining 7 processes
ACCELERATE_LOG_LEVEL=info accelerate launch \
    --config_file recipes/accelerate_configs/zero2.yaml \
    --num_processes=7 \
    src/open_r1/grpo.py \
    --config recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml \
    --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct \
    --dataset_name AI-MO/NuminaMath-TIR \
    --use_vllm true \
    --vllm_device auto \
    --num_generations 8 \
    --per_device_train_batch_size 1 \
    --gradient_accumulation_steps 16 \
    --max_prompt_length 512 \
    --max_completion_length 1024 \
    --learning_rate 3.0e-06 \
    --bf16 true \
    --output_dir data/Qwen2.5-1.5B-Open-R1-GRPO
