"""What services and clients share and neither owns: limits, errors, the record-batch codec.

Nothing here does I/O, and nothing here imports from `samsa.services` or `samsa.client`
(tests/unit/test_import_direction.py checks both).
"""
