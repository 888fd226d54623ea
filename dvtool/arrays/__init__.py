"""Arrow arrays and scalars from Python values, built without pyarrow's pandas check; used
by every format's value handling and by the engines. No IO.
"""
