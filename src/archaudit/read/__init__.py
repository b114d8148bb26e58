"""Read: wheels, directories and files into `model` records (Library, Container, Entry).

Streams wheel members in place (zipread), scans each library in one forward pass (scan, with
the format readers elf, pe, macho, fatbin, hip), decodes payloads on one pool (decode). Nothing
here judges: the rules live in archaudit.judge and import none of this.
"""
