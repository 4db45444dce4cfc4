"""Data sets (through torchvision, or shipped with installed packages) and partitions."""
