"""The local web dashboard (``memtrio ui``, ``memtrio serve --ui``): static pages and their JSON API."""
