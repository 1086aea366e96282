"""Tool components (SPEC 3.17), one module per service family.

Every module here is imported by the registry, so a new tool only needs its module: it subclasses
`canvas2graph.nodes.tool.Tool` and registers itself with `@register(component_name, Params, outputs=...)`.
"""
import importlib
import pkgutil


def load_all() -> None:
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
