"""Model providers: one adapter per wire format, each keeping its SDK's types to itself."""
