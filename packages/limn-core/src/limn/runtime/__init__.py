"""Where lazy values become bytes: the device protocol and registry, the numpy reference interpreter, and the
realize engine that hands a graph to the chosen device."""
