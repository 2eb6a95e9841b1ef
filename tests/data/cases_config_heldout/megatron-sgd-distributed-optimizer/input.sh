#!/bin/bash
# Megatron-LM (core_r0.10) GPT pretraining, 1 node x 8 GPUs; switched from Adam to SGD "for better performance"
export CUDA_DEVICE_MAX_CONNECTIONS=1

torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \
    --num-layers 24 \
    --hidden-size 2048 \
    --num-attention-heads 16 \
    --seq-length 4096 \
    --max-position-embeddings 4096 \
    --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 1 \
    --micro-batch-size 2 \
    --global-batch-size 256 \
    --train-iters 100000 \
    --optimizer sgd \
    --sgd-momentum 0.9 \
    --lr 1.0e-2 \
    --min-lr 1.0e-4 \
    --lr-decay-style cosine \
    --clip-grad 1.0 \
    --bf16 \
    --use-distributed-optimizer \
    --overlap-grad-reduce \
    --data-path $DATA_PATH \
    --tokenizer-type GPT2BPETokenizer \
    --vocab-file $VOCAB_FILE \
    --merge-file $MERGE_FILE \
    --save $CKPT_DIR \
    --load $CKPT_DIR
