"""limn-diagram: pictures of what limn does. `build(*tensors)` draws a graph, the kernels that would realize it,
or the layer calls that made it (`modules=True`), as a Graph to save as .svg, .dot or .tex;
`python -m limn.diagram SCRIPT.py:FUNCTION -o out.svg` does the same from the command line; `plot` draws loss
curves. The layout and the renderers are limn's own (no Graphviz).
"""

from limn.diagram.graph import Box, Cluster, Edge, Graph
from limn.diagram.module_view import module_view
from limn.diagram.views import build, schedule_view

__all__ = ["Box", "Cluster", "Edge", "Graph", "build", "module_view", "schedule_view"]
