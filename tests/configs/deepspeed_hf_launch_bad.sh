#!/bin/bash
# HF Trainer SFT warm-up before GRPO, DeepSpeed ZeRO-2 config written next to the launch.
# cluster: 1 node x 8 GPUs
OUTPUT_DIR=${OUTPUT_DIR:-./output/qwen2.5-7b-sft}
NUM_GPUS=${NUM_GPUS:-8}

cat > ds_config_zero2.json <<JSON
{
  "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "bf16": {"enabled": "auto"},
  "zero_optimization": {
    "stage": 2,
    "overlap_comm": true,
    "contiguous_gradients": true,
    "reduce_scatter": true,
    "reduce_bucket_size": 500000000
  }
}
JSON

deepspeed --num_gpus ${NUM_GPUS} train_sft.py \
    --model_name_or_path Qwen/Qwen2.5-7B \
    --dataset_name open-r1/Mixture-of-Thoughts \
    --deepspeed ds_config_zero2.json \
    --bf16 True \
    --torch_compile True \
    --per_device_train_batch_size 2 \
    --gradient_accumulation_steps 8 \
    --learning_rate 2e-5 \
    --max_grad_norm 1.0 \
    --output_dir ${OUTPUT_DIR}
