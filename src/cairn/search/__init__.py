"""Search: embedders, keyword and vector recall, fusion."""
