"""Reading the sinks' files: local or S3, through the one path model, and ahead of the rounds.

Used by the committers (``delta/``) and by the service's composition (``http/app.py``); imports
the domain and the config only.

- ``reader``: ``StorageReader``, every read, stat, list, copy and put of the service (pyarrow);
- ``facts``: what a file's stat and footer say (``FileFacts``);
- ``prefetch``: ``FactsCache``, footers read while a file waits for its round;
- ``dead_letters``: ``ObjectDeadLetterStore``, the dead letters as objects beside their table.
"""
