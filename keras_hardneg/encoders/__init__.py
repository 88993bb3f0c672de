"""Encoders and heads: images ``[B, H, W, 3]`` in ``[0, 1]`` (or padded graph batches) ->
float32 features ``[B, F]``.

* :func:`resnet18_cifar` -- CIFAR ResNet-18 (SimCLR, Chen et al. 2020), ``F = 8 * width``.
* :func:`resnet50` -- ImageNet ResNet-50 (He et al. 2016), ``F = 32 * width``.
* :func:`small_convnet` -- tiny conv-BN-ReLU encoder for quick runs, ``F = 4 * width``.
* :func:`gin` -- Graph Isomorphism Network (Xu et al. 2019) for padded graph batches,
  ``F = num_layers * width`` (:class:`GINEncoder`).
* :func:`text_transformer` -- a small Transformer sentence encoder (pre-LN, dropout, mean or
  CLS pooling over real tokens): token ids ``int32 [B, L]`` -> ``[B, width]``;
  :func:`mean_embedding_encoder` -- the mean-of-token-embeddings baseline.
* :func:`pretrained_text` -- a pretrained BERT-family checkpoint (keras-hub's BertBackbone
  from a Hugging Face-format folder or a keras-hub preset; the optional ``pretrained``
  extra) with mean or CLS pooling: token ids ``int32 [B, L]`` -> ``[B, hidden_size]``
  (registered as ``"pretrained_bert"``).
* :class:`FusedBatchNormalization` -- Keras batch norm computed by one fused TensorFlow
  kernel (used by the ResNets and the small convnet; faster on CPU, see docs/benchmarks/throughput.md).
* :func:`projection_head`, :func:`prediction_head`, :class:`ProjectionHead` -- MLP heads
  (SimCLR v1/v2, MoCo v2/v3) exposing the input of their last Dense layer.

Every image encoder normalises its input itself (:class:`ImageNormalization`, ImageNet
mean/std by default) and casts its output to float32 (mixed-precision safe).
"""

from keras_hardneg.encoders.batch_norm import FusedBatchNormalization
from keras_hardneg.encoders.gin import GINEncoder, gin
from keras_hardneg.encoders.heads import (HEAD_VERSIONS, ProjectionHead, prediction_head,
                                          projection_head)
from keras_hardneg.encoders.normalization import ImageNormalization
from keras_hardneg.encoders.pretrained_text import pretrained_text
from keras_hardneg.encoders.resnet import resnet18_cifar, resnet50
from keras_hardneg.encoders.small_convnet import small_convnet
from keras_hardneg.encoders.text_transformer import mean_embedding_encoder, text_transformer

__all__ = [
    "FusedBatchNormalization",
    "GINEncoder",
    "HEAD_VERSIONS",
    "ImageNormalization",
    "mean_embedding_encoder",
    "ProjectionHead",
    "gin",
    "prediction_head",
    "pretrained_text",
    "projection_head",
    "resnet18_cifar",
    "resnet50",
    "small_convnet",
    "text_transformer",
]
