"""Reading a KRaft broker's metadata log (``__cluster_metadata-0``): topics, assignments and configs."""

__all__: list[str] = []
