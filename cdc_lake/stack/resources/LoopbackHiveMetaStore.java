import java.lang.reflect.Field;
import java.net.InetSocketAddress;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.TServerSocketKeepAlive;
import org.apache.hadoop.hive.metastore.TUGIBasedProcessor;
import org.apache.hadoop.hive.metastore.api.ThriftHiveMetastore;
import org.apache.hadoop.hive.thrift.TUGIContainingTransport;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;

/**
 * Hive 2.3's metastore thrift server, bound to one address: {@code HiveMetaStore.main} binds the
 * wildcard address (its {@code startMetaStore} passes no host, and Hive 2.3 has no bind-host setting).
 *
 * <p>Serves as {@code startMetaStore} does with the settings of the local stack's {@code hive-site.xml}
 * (no SASL, no SSL, binary protocol, {@code hive.metastore.execute.setugi} and TCP keep-alive at their
 * defaults); the compactor and housekeeping threads are not started.
 *
 * <p>Usage: {@code LoopbackHiveMetaStore HOST PORT}. Compiled by the stack with Janino (pyspark's jars),
 * so a Java runtime without a compiler runs it.
 */
public final class LoopbackHiveMetaStore {
    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        HiveConf.setLoadMetastoreConfig(true);
        HiveConf conf = new HiveConf(HiveMetaStore.HMSHandler.class);
        Field remote = HiveMetaStore.class.getDeclaredField("isMetaStoreRemote");
        remote.setAccessible(true);
        remote.setBoolean(null, true);
        ThriftHiveMetastore.Iface handler =
                HiveMetaStore.newRetryingHMSHandler("new db based metaserver", conf, false);
        long maxMessage = conf.getLongVar(HiveConf.ConfVars.METASTORESERVERMAXMESSAGESIZE);
        TServerSocket socket = new TServerSocketKeepAlive(new TServerSocket(new InetSocketAddress(host, port)));
        TThreadPoolServer.Args server = new TThreadPoolServer.Args(socket);
        server.processor(new TUGIBasedProcessor(handler));
        server.transportFactory(new TUGIContainingTransport.Factory());
        server.protocolFactory(new TBinaryProtocol.Factory());
        server.inputProtocolFactory(new TBinaryProtocol.Factory(true, true, maxMessage, maxMessage));
        server.minWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMINTHREADS));
        server.maxWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMAXTHREADS));
        new TThreadPoolServer(server).serve();
    }
}
