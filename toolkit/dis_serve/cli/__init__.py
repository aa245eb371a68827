"""Command-line interface: parses arguments and prints; the work lives in the other packages."""
