#!/bin/bash
# OpenRLHF 0.3.x, examples/scripts/train_sft_llama.sh (batch settings unchanged from the example)
# node has 8 GPUs but GPU 7 is disabled as unstable -> 7 GPUs in use
set -x
deepspeed --include localhost:0,1,2,3,4,5,6 ../train_sft.py \
   --max_len 2048 \
   --dataset Open-Orca/OpenOrca \
   --input_key question \
   --output_key response \
   --train_batch_size 256 \
   --micro_train_batch_size 2 \
   --max_samples 500000 \
   --pretrain meta-llama/Meta-Llama-3-8B \
   --save_path ./checkpoint/llama3-8b-sft \
   --save_steps -1 \
   --logging_steps 1 \
   --eval_steps -1 \
   --zero_stage 2 \
   --max_epochs 1 \
   --bf16 \
   --flash_attn \
   --learning_rate 5e-6 \
   --gradient_checkpointing
