"""The sequence-to-sequence Transformer that visitors train in the app (the Train page).

    model.py      ModelConfig, Seq2SeqTransformer: the paper's encoder-decoder, small
    tasks.py      the toy tasks (copy, reverse, sort, addition, date) and their vocabularies
    training.py   TrainConfig, Trainer (a generator of progress), checkpoints (safetensors + JSON), load_checkpoint
    __main__.py   the command line: python -m viz_core.seq2seq --task reverse --max-seconds 60 --out DIR
"""
