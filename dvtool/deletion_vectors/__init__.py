"""Deletion vectors shared by every format: the portable Roaring codec (`roaring`), the DV
record (`codec`: length, magic, 64-bit Roaring bitmap, CRC-32) and its framings, Delta's
DV files and Iceberg's Puffin `deletion-vector-v1` blobs (`puffin`). No IO.
"""
