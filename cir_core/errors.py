"""User-facing errors. Their message is shown as-is (CLI, app), so it must name the culprit."""


class CIRError(Exception):
    """Base class: an error caused by the user's input or environment, not a bug."""


class InputError(CIRError, ValueError):
    """Bad user input: empty or oversized text, wrong embedding dimension, unknown name."""


class ImageLoadError(CIRError, ValueError):
    """An image could not be read: corrupt, truncated, unsupported, or too large."""


class BackboneError(CIRError):
    """A backbone could not be built or loaded."""


class CheckpointError(CIRError):
    """A checkpoint is missing, unreadable, or does not fit the model it is loaded into."""


class GalleryError(CIRError):
    """A gallery folder or manifest is missing, empty, or malformed."""
