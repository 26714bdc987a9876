"""Consumer and producers: one consumer fans work out to N producers with futures."""
