"""Apache Paimon: the table format's model and readers (``model``, ``types``, ``partition``, ``manifests``,
``paths``, ``table``), what a table holds and pins (``reachability``, ``state``) and ``inspect``.

The ``engine`` package root keeps only what is format-neutral: FileIO, errors, the plan and its codec.
"""
