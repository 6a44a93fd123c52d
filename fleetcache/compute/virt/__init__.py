"""Virt drivers: the seam between the compute manager and what a host does with images."""
