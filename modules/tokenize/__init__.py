"""Tokenization: documents to Megatron ``.bin``/``.idx`` token files, and the tools around them.

``load`` (tokenizers by name), ``megatron`` (the file format, its writer and reader), ``writer``
(the ``tokenize`` stage), ``verify`` (the checks behind ``curate verify``) and ``merge``
(``curate merge``).
"""
