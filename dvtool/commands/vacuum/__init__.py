"""`dvtool vacuum`: delete files no retained version references (`command`), with retention,
listing, the files to keep, lite mode and the deletion itself in the modules beside it.
"""
