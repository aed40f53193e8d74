"""Real architectures, built from their HuggingFace configs with random weights (nothing is
downloaded), for ``python -m harness cases from-model cases.models.zoo:NAME``.

Needs the optional extra: ``pip install -e '.[models]'`` (transformers). Every conv argument is
the real model's (patch embeddings' kernel = stride, depthwise groups, TF-style "valid"/"same"
padding, strides, dilations, channel counts); where the real config is deep, only the number of
repeated transformer layers is cut, which no conv depends on. Each factory's ``input_shape`` is
the input the real model is fed (its config's image size, 1 s of 16 kHz audio, Whisper's 30 s of
80-bin log-mel frames).

Each conv's context in the model is recorded with it (``harness/generation/graph_context.py``):
ResNet's conv -> batchnorm -> relu and conv -> batchnorm -> add -> relu, MobileNetV2's explicit
TF pad before conv -> batchnorm -> relu6; what the case vocabulary cannot say (EfficientNet's
silu, ConvNeXt's permute -> layer_norm, the audio encoders' gelu) is named in ``source``.
"""

from __future__ import annotations


def _input(*shape):
    def mark(factory):
        factory.input_shape = shape
        return factory
    return mark


@_input(1, 3, 224, 224)
def siglip_so400m_patch14_224():
    """SigLIP so400m/14 at 224 vision tower: patch embed Conv2d(3, 1152, k14, s14, "valid")."""
    from transformers import SiglipVisionConfig, SiglipVisionModel

    return SiglipVisionModel(SiglipVisionConfig(
        hidden_size=1152, intermediate_size=4304, num_attention_heads=16, patch_size=14,
        image_size=224, num_hidden_layers=1))  # the real tower has 27 layers, no conv in them


@_input(1, 3, 224, 224)
def clip_vit_b32():
    """CLIP ViT-B/32 vision tower: patch embed Conv2d(3, 768, k32, s32, padding 0, no bias)."""
    from transformers import CLIPVisionConfig, CLIPVisionModel

    return CLIPVisionModel(CLIPVisionConfig(patch_size=32, image_size=224, num_hidden_layers=1))


@_input(1, 3, 224, 224)
def resnet50():
    """ResNet-50 (the config's defaults: bottleneck blocks, depths 3-4-6-3)."""
    from transformers import ResNetConfig, ResNetModel

    return ResNetModel(ResNetConfig())


@_input(1, 3, 224, 224)
def convnext_tiny():
    """ConvNeXt-T (the config's defaults): k4 s4 stem, 7x7 depthwise, k2 s2 downsampling."""
    from transformers import ConvNextConfig, ConvNextModel

    return ConvNextModel(ConvNextConfig())


@_input(1, 3, 224, 224)
def mobilenet_v2():
    """MobileNetV2 1.0 at 224 (the config's defaults, TF padding): depthwise 3x3, 1x1 expand."""
    from transformers import MobileNetV2Config, MobileNetV2Model

    return MobileNetV2Model(MobileNetV2Config())


@_input(1, 3, 224, 224)
def efficientnet_b0():
    """EfficientNet-B0 (width/depth 1.0 at 224; the config's default is B7 at 600):
    depthwise k3/k5 with "same", or "valid" after an explicit pad when strided."""
    from transformers import EfficientNetConfig, EfficientNetModel

    return EfficientNetModel(EfficientNetConfig(width_coefficient=1.0, depth_coefficient=1.0,
                                                image_size=224, hidden_dim=1280))


@_input(1, 16000)
def wav2vec2_base():
    """wav2vec 2.0 base: the 7-conv feature encoder (k10 s5, k3 s2, k2 s2; no bias) and the
    positional conv embedding (Conv1d 768, k128, padding 64, groups 16)."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    return Wav2Vec2Model(Wav2Vec2Config(num_hidden_layers=1))


@_input(1, 80, 3000)
def whisper_tiny_encoder():
    """Whisper tiny's encoder: Conv1d(80, 384, k3, p1) then Conv1d(384, 384, k3, s2, p1)."""
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    return WhisperEncoder(WhisperConfig(d_model=384, encoder_layers=1, encoder_attention_heads=6,
                                        num_mel_bins=80, max_source_positions=1500))


FACTORIES = [siglip_so400m_patch14_224, clip_vit_b32, resnet50, convnext_tiny, mobilenet_v2,
             efficientnet_b0, wav2vec2_base, whisper_tiny_encoder]
