"""The smallest ``--input-size`` each image model of the zoo accepts, and the largest of position-table transformers.

Checked by ``horus features``, ``horus profile`` and ``horus train``. An image model (one fed a 4-D image
tensor, or 5-D frames: conv nets, detectors, GANs, Atari-style RL, ViT) is refused below
``IMAGE_FLOOR`` pixels (32: CIFAR, the smallest images the zoo's models are trained on; below it a conv net's
deepest feature maps exist only through padding, e.g. a ResNet's at ``--input-size 1``, and its feature vector
describes no network anyone trains), and below the smallest size whose training graph still exports at batch 2
(valid convolutions and pooling need more: Inception v3 299, for its auxiliary classifier runs in training;
DCGAN 64). ``MIN_INPUT_SIZE`` holds the result per
model; ``python -m horus.graph.input_sizes`` measures it again and tests check it against the zoo. At batch 1
some models need more still (BatchNorm needs more than one value per channel): that fails as a one-line
"torch.export failed" error, as do sizes a model cannot take at all (CycleGAN: multiples of 4). Sequence,
recommendation and other non-image models accept any size from 1.
"""

from __future__ import annotations

from horus.errors import HorusInputError

IMAGE_FLOOR = 32
# measured with ``python -m horus.graph.input_sizes`` (meta device, batch 2)
MIN_INPUT_SIZE: dict[str, int] = {
    "squeezenet1_0": 32, "squeezenet1_1": 32, "shufflenet_v2_x1_0": 32, "densenet121": 32, "yolo": 32, "dcgan": 64,
    "cyclegan": 32, "inception_v3": 299, "mobilenet_v2": 32, "mobilenet_v3_large": 32, "mobilenet_v3_small": 32,
    "efficientnet_b0": 32, "shufflenet_v2_cifar100": 32, "resnet18": 32, "resnet34": 32, "resnet50": 32,
    "resnet101": 32, "resnet18_cifar": 32, "a3c": 32, "ppo": 36, "vgg11": 32, "vgg16": 32, "vgg19": 32,
    "alexnet": 63, "vit_b16": 32, "vgg11_cifar": 32, "vgg16_cifar": 32, "resnet50_cifar": 32, "mobilenet_v2_cifar": 32,
}


# the largest sequence length of the zoo's transformers with a learned position table: its size in the
# ``transformers`` config the zoo builds them from (``BertConfig.max_position_embeddings`` = 512,
# ``GPT2Config.n_positions`` = 1024, the published models' own; a test checks them against the configs). T5 has
# relative positions and no such bound.
MAX_INPUT_SIZE: dict[str, int] = {
    "bert_base": 512, "bert_large": 512, "bert_base_squad": 512, "gpt2": 1024, "gpt2_medium": 1024, "gpt2_xl": 1024,
}


def image_models() -> list[str]:
    """Zoo models fed images (a 4-D or, for a rollout of frames, 5-D example input): ``MIN_INPUT_SIZE``'s keys."""
    from horus.zoo import ZOO

    return [name for name, entry in ZOO.items()
            if entry.example_input(1, entry.default_input_size, "meta")[0].dim() >= 4]


def check_input_size(model: str, size: int | None, source: str) -> None:
    """HorusInputError when ``size`` is below ``MIN_INPUT_SIZE[model]`` or above ``MAX_INPUT_SIZE[model]`` (None:
    the zoo default, always fine)."""
    if size is None:
        return
    low = MIN_INPUT_SIZE.get(model)
    if low is not None and size < low:
        raise HorusInputError(source, f"zoo model {model!r} needs an input size of at least {low} pixels, got "
                                      f"{size} (docs/inputs.md)")
    high = MAX_INPUT_SIZE.get(model)
    if high is not None and size > high:
        raise HorusInputError(source, f"zoo model {model!r} has {high} positions: a sequence of at most {high} "
                                      f"tokens, got {size} (docs/inputs.md)")


def measure_minimum(model_name: str) -> int:
    """``MIN_INPUT_SIZE`` of one image model: the smallest size from ``IMAGE_FLOOR`` up whose graph exports."""
    from horus.graph.extract import extract_zoo_features
    from horus.zoo import get_entry

    default = get_entry(model_name).default_input_size

    def works(size: int) -> bool:
        import warnings

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's "zero-element tensors" note on collapsed maps
                extract_zoo_features(model_name, 2, size)
        except HorusInputError:
            return False
        return True

    low, high = min(IMAGE_FLOOR, default), default
    if works(low):  # e.g. CycleGAN: any multiple of 4 from 32 (other sizes fail as one-line export errors)
        return low
    while low < high:  # otherwise the exportable sizes run from the minimum up to the default
        mid = (low + high) // 2
        if works(mid):
            high = mid
        else:
            low = mid + 1
    return low


def main() -> None:
    import logging

    logging.disable(logging.CRITICAL)
    for name in image_models():
        print(f'    "{name}": {measure_minimum(name)},', flush=True)


if __name__ == "__main__":
    main()
