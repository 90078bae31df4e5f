"""Single source of the package version (read by meson.build and packboost/__init__.py)."""

__version__ = "0.1.0"

if __name__ == "__main__":
    print(__version__)
