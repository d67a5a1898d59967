import six

print("six " + six.__version__ + " says " + six.ensure_str(b"hello"))
