"""The compute agent: one per host; caches images and builds instance disks from them."""
