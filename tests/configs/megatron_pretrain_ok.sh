#!/bin/bash
# Megatron-LM GPT pretraining, shaped like examples/gpt3/train_gpt3_175b_distributed.sh (shrunk to 8B).
export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=6000
NUM_NODES=${NUM_NODES:-2}
NODE_RANK=${NODE_RANK:-0}

CHECKPOINT_PATH=$1
TENSORBOARD_LOGS_PATH=$2
DATA_PATH=$3

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --node_rank $NODE_RANK
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

GPT_MODEL_ARGS=(
    --num-layers 32
    --hidden-size 4096
    --num-attention-heads 32
    --seq-length 4096 --max-position-embeddings 4096
    --attention-backend auto
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 512
    --train-iters 100000
    --weight-decay 0.1
    --optimizer adam
    --adam-beta1 0.9 --adam-beta2 0.95
    --init-method-std 0.006
    --clip-grad 1.0
    --bf16
    --lr 3.0e-4
    --lr-decay-style cosine --min-lr 3.0e-5 --lr-warmup-fraction .001
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 4
    --pipeline-model-parallel-size 2
)

DATA_ARGS=(
    --data-path $DATA_PATH
    --tokenizer-type HuggingFaceTokenizer
    --tokenizer-model meta-llama/Llama-3.1-8B
    --split 949,50,1
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 10 --save-interval 1000 --eval-interval 1000 --eval-iters 10
    --save $CHECKPOINT_PATH --load $CHECKPOINT_PATH
    --tensorboard-dir $TENSORBOARD_LOGS_PATH
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${GPT_MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${EVAL_AND_LOGGING_ARGS[@]}
