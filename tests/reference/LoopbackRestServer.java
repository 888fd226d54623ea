// Iceberg's REST catalog fixture (RESTCatalogAdapter behind RESTCatalogServlet, a JdbcCatalog
// on SQLite as backend, as org.apache.iceberg.rest.RESTCatalogServer sets it up), listening
// on 127.0.0.1 only: RESTCatalogServer binds every interface and has no host setting.
// Run in Java's source-file mode by tests/reference/iceberg_catalogs.py:
//   java -cp CLASSPATH LoopbackRestServer.java PORT WAREHOUSE JDBC_URI
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;

public class LoopbackRestServer {
  public static void main(String[] args) throws Exception {
    Map<String, String> properties = new HashMap<>();
    properties.put("catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog");
    properties.put("warehouse", args[1]);
    properties.put("uri", args[2]);
    properties.put("jdbc.schema-version", "V1");
    Catalog catalog =
        CatalogUtil.buildIcebergCatalog("rest_backend", properties, new Configuration());
    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(
        new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))), "/*");
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(Integer.parseInt(args[0]));
    server.addConnector(connector);
    server.setHandler(context);
    server.start();
    server.join();
  }
}
