"""Errors a user can cause, and how they reach the terminal.

Every mistake a user can make from the command line (a missing corpus, an unknown option, a model
that cannot pose the data's task, a checkpoint that is not there) raises `UserError` with one
sentence that says what is wrong and what to do. The entry points print that sentence instead of a
traceback from deep inside Lightning or PyTorch.
"""


class UserError(Exception):
    """A mistake in the user's data, config or command line, explained in one sentence."""


class DataNotFoundError(UserError):
    """A corpus file is missing and could not be downloaded."""


class ChecksumError(UserError):
    """A corpus file exists but is not the published file."""


class ConfigError(UserError):
    """A config value is unknown, of the wrong type, or incompatible with another one."""


class DataFormatError(UserError):
    """A corpus file is readable but a line does not have the format the corpus promises."""
