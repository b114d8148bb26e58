"""archaudit: prove a GPU wheel carries device code for every GPU it claims."""

__version__ = "0.1.0"  # the one place the version is written; pyproject.toml reads it from here
