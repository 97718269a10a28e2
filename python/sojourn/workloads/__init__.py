"""Request streams: size and popularity models, arrivals, importers, load shaping, docroots."""
