"""The Tensor a user holds: a lazy value over the op graph, its primitive methods, and the class that gathers
the composed catalogue. Pipeline: **tensor** -> graph -> schedule -> IR -> renderer -> device."""
